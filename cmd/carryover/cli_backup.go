package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/persistence/backup"
	"github.com/carryover/carryover/persistence/sqlite"
	"github.com/carryover/carryover/server"
)

// backupCmd takes one snapshot of data_dir's SQLite store into a replica (persistence/backup),
// consistent while a server on that data dir keeps running turns.
func backupCmd() *cobra.Command {
	var file, to string
	cmd := &cobra.Command{
		Use:   "backup --to DIR|s3://bucket/prefix",
		Short: "Snapshot the SQLite store (while the server runs) into a directory or an S3 bucket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configs.Load(file, cmd.Flags())
			if err != nil {
				return err
			}
			if to == "" {
				to = cfg.Backup.To
			}
			t, err := backup.Open(cmd.Context(), to, server.BackupS3(cfg))
			if err != nil {
				return err
			}
			db := filepath.Join(cfg.DataDir, "carryover.db")
			src := backup.CopyFunc(func(ctx context.Context, path string) error { return sqlite.BackupFile(ctx, db, path) })
			m, err := backup.Snapshot(cmd.Context(), src, t, filepath.Join(cfg.DataDir, "backup-tmp"), db, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s: %d bytes in %d pieces, as of %s\n", m.Key, m.Bytes, len(m.Pieces),
				m.Finished.Format(time.RFC3339Nano))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "YAML config file (see configs/carryover.yaml)")
	cmd.Flags().String("data_dir", "./data", "the data dir whose store is copied")
	cmd.Flags().StringVar(&to, "to", "", "a directory or s3://bucket/prefix (backup.s3 has the endpoint and keys; default backup.to)")
	return cmd
}

// restoreCmd rebuilds a data dir from a replica as of a point in time.
func restoreCmd() *cobra.Command {
	var file, from, at, to string
	var list bool
	cmd := &cobra.Command{
		Use:   "restore --from DIR|s3://bucket/prefix [--to-time T] --to DATA_DIR",
		Short: "Rebuild a data dir from a backup, as of the last snapshot finished by --to-time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configs.Load(file, cmd.Flags())
			if err != nil {
				return err
			}
			t, err := backup.Open(cmd.Context(), from, server.BackupS3(cfg))
			if err != nil {
				return err
			}
			if list {
				ms, err := backup.List(cmd.Context(), t)
				if err != nil {
					return err
				}
				for _, m := range ms {
					fmt.Fprintf(cmd.OutOrStdout(), "%s  %d bytes  %s\n", m.Finished.Format(time.RFC3339Nano), m.Bytes, m.Key)
				}
				return nil
			}
			var when time.Time
			if at != "" {
				if when, err = time.Parse(time.RFC3339Nano, at); err != nil {
					return fmt.Errorf("--to-time: %w (RFC 3339, e.g. 2026-11-26T13:05:00Z)", err)
				}
			}
			if to == "" {
				return fmt.Errorf("--to: the data dir to rebuild (it must have no carryover.db)")
			}
			m, err := backup.Restore(cmd.Context(), t, when, to)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s: the store as of %s (every commit before %s, none after)\n",
				m.Key, to, m.Finished.Format(time.RFC3339Nano), m.Started.Format(time.RFC3339Nano))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "YAML config file (backup.s3 for s3:// replicas)")
	cmd.Flags().StringVar(&from, "from", "", "the replica: a directory or s3://bucket/prefix")
	cmd.Flags().StringVar(&at, "to-time", "", "RFC 3339 time; default: the newest snapshot")
	cmd.Flags().StringVar(&to, "to", "", "the data dir to rebuild")
	cmd.Flags().BoolVar(&list, "list", false, "list the replica's snapshots instead")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}
