package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

// exportCmd writes a session's archive (docs/export-format.md) to a file or stdout. A file is
// written beside its final name and renamed once whole, so an interrupted export never leaves a
// truncated archive under the name asked for.
func (c *cli) exportCmd() *cobra.Command {
	var outFile, checkpoint, dir string
	var events bool
	cmd := &cobra.Command{
		Use: "export ID [-o FILE | --dir DIR] [--checkpoint CID] [--events]", Short: "Export a session's state (namespace, files, packages, settings) to one archive",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if dir != "" {
				return c.exportToDir(cmd, args[0], client.ExportOptions{CheckpointID: checkpoint, Events: events}, dir)
			}
			if outFile == "" || outFile == "-" {
				return c.client().ExportSessionWith(cmd.Context(), args[0], client.ExportOptions{CheckpointID: checkpoint, Events: events}, cmd.OutOrStdout())
			}
			tmp, err := os.CreateTemp(filepath.Dir(outFile), "."+filepath.Base(outFile)+".*")
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			cw := &countingWriter{w: tmp}
			err = c.client().ExportSessionWith(cmd.Context(), args[0], client.ExportOptions{CheckpointID: checkpoint, Events: events}, cw)
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := os.Rename(tmp.Name(), outFile); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d bytes\n", outFile, cw.n)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&outFile, "output", "o", "", "write to FILE instead of stdout")
	cmd.Flags().StringVar(&checkpoint, "checkpoint", "", "export this checkpoint (default: the session's current state)")
	cmd.Flags().BoolVar(&events, "events", false, "carry the session's event log too (an archive of version 2)")
	cmd.Flags().StringVar(&dir, "dir", "", "keep the archive as a directory: exporting again into it writes only the chunks that changed")
	return cmd
}

// exportToDir exports session id into dir (cli_portable_dir.go), the archive streamed through.
func (c *cli) exportToDir(cmd *cobra.Command, id string, o client.ExportOptions, dir string) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := c.client().ExportSessionWith(cmd.Context(), id, o, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	st, err := unpackArchive(pr, dir)
	pr.CloseWithError(err)
	xerr := <-done
	if err != nil {
		return err
	}
	if xerr != nil {
		return xerr
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d chunks written (%d bytes), %d unchanged, %d removed\n", dir, st.written, st.bytes, st.kept, st.removed)
	return nil
}

// importCmd makes a new session from an archive (a file, or stdin for "-").
func (c *cli) importCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use: "import FILE|DIR [--to NEW_ID]", Short: "Make a new session from an exported archive (its first run restores the state)",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			if fi, err := os.Stat(args[0]); err == nil && fi.IsDir() {
				pr, pw := io.Pipe()
				go func() { pw.CloseWithError(packDir(args[0], pw)) }()
				defer pr.Close()
				in = pr
			} else if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			res, err := c.client().ImportSession(cmd.Context(), in, to)
			if err != nil {
				return err
			}
			if c.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %s (from %s, turn %d): %d chunks, %d already stored, %d bytes written\n",
				res.Session.ID, res.Source.SessionID, res.Source.Turn, res.Chunks, res.ChunksPresent, res.BytesWritten)
			for _, w := range res.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&to, "to", "", "the new session's id (generated when empty)")
	return cmd
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
