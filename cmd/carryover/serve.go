package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/configs"
)

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
			return serve(cmd.Context(), cfg)
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

func serve(ctx context.Context, cfg *configs.Config) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	srv := &http.Server{Addr: cfg.Server.Addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("carryover listening", "addr", cfg.Server.Addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), configs.Seconds(float64(cfg.Server.ShutdownGraceSeconds)))
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
