package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/server"
)

// uiHandler is set by ui.go when the web package is built in: the UI's handler, serving the folder
// dir from disk when dir is set (server.web_dir), else the embedded files.
var uiHandler func(dir string) http.Handler

func serveCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the API server and the browser UI",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configs.Load(file, cmd.Flags())
			if err != nil {
				return err
			}
			return serve(cfg)
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "YAML config file (see configs/carryover.yaml)")
	cmd.Flags().String("server.addr", "127.0.0.1:8080", "listen address")
	cmd.Flags().String("data_dir", "./data", "database and workspaces directory")
	cmd.Flags().String("auth.token", "", "API token (empty: generated and printed)")
	cmd.Flags().String("kernel.python", "/usr/bin/python3", "Python interpreter for kernels")
	cmd.Flags().Int("pool.size", 2, "warm kernels kept ready")
	return cmd
}

// serve runs until SIGINT/SIGTERM, then shuts down gracefully and exits 0; a server that must stop
// (Server.Fatal) shuts down the same way and exits non-zero with its reason.
func serve(cfg *configs.Config) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var ui http.Handler
	if uiHandler != nil {
		ui = uiHandler(cfg.Server.WebDir)
	}
	srv, err := server.New(context.Background(), cfg, ui, log)
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		// Nothing was served: stop what New started (the warm pool's kernels, their boxes' mounts,
		// the store), or a start on a taken address left them behind.
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if serr := srv.Shutdown(sctx); serr != nil {
			log.Warn("stopping after the failed listen", "err", serr)
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("carryover listening", "addr", srv.Addr(), "data_dir", cfg.DataDir)
	fmt.Fprintf(os.Stderr, "\n    carryover is running. Open the UI at:\n\n        %s\n\n    MCP (Streamable HTTP): http://%s/mcp with \"Authorization: Bearer <the token>\"\n\n", srv.URL(), srv.Addr())
	return srv.Run(ctx, 2*time.Minute)
}
