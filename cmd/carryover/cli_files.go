package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

// filesPath is the URL path of a workspace file ("notes.md" or "/workspace/notes.md").
func filesPath(sid, p string) (string, error) {
	rel, err := workspacePath(p)
	if err != nil {
		return "", err
	}
	parts := strings.Split(rel, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return apiPath(sid, "files") + "/" + strings.Join(parts, "/"), nil
}

func (c *cli) filesCmd() *cobra.Command {
	var sid string
	cmd := &cobra.Command{Use: "files", Short: "List, download and upload a session's workspace files"}
	cmd.PersistentFlags().StringVarP(&sid, "session", "s", "", "session id")
	_ = cmd.MarkPersistentFlagRequired("session")
	cmd.AddCommand(c.filesLsCmd(&sid), c.filesGetCmd(&sid), c.filesPutCmd(&sid))
	return cmd
}

// filesLsCmd lists the workspace's files.
func (c *cli) filesLsCmd(sid *string) *cobra.Command {
	return &cobra.Command{
		Use: "ls", Short: "List the workspace's files", Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Files []client.FileInfo `json:"files"`
			}
			if err := c.call(cmd, http.MethodGet, apiPath(*sid, "files"), nil, &out); err != nil || c.json {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PATH\tSIZE\tMODIFIED")
			for _, f := range out.Files {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", cell(f.Path), f.Size, timeText(f.ModifiedAt))
			}
			return tw.Flush()
		}),
	}
}

// filesGetCmd downloads a workspace file to stdout or a file.
func (c *cli) filesGetCmd(sid *string) *cobra.Command {
	var outFile string
	get := &cobra.Command{
		Use: "get PATH [-o FILE]", Short: "Download a workspace file (to stdout, or to FILE)", Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			p, err := filesPath(*sid, args[0])
			if err != nil {
				return err
			}
			var data []byte
			if err := c.client().Do(cmd.Context(), http.MethodGet, p, nil, &data); err != nil {
				return err
			}
			if outFile == "" || outFile == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := os.WriteFile(outFile, data, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d bytes\n", outFile, len(data))
			return nil
		}),
	}
	get.Flags().StringVarP(&outFile, "output", "o", "", "write to FILE instead of stdout")
	return get
}

// filesPutCmd uploads a local file (or stdin) into the workspace.
func (c *cli) filesPutCmd(sid *string) *cobra.Command {
	return &cobra.Command{
		Use:   "put LOCAL [REMOTE]",
		Short: "Upload a local file (\"-\": stdin) to the workspace (REMOTE defaults to its base name)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			remote := filepath.Base(args[0])
			if len(args) == 2 {
				remote = args[1]
			} else if args[0] == "-" {
				return errors.New("uploading stdin needs a REMOTE path")
			}
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			p, err := filesPath(*sid, remote)
			if err != nil {
				return err
			}
			var out struct {
				File client.FileInfo `json:"file"`
			}
			if err := c.call(cmd, http.MethodPut, p, data, &out); err != nil || c.json {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "/workspace/%s: %d bytes\n", out.File.Path, out.File.Size)
			return nil
		}),
	}
}
