package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/persistence/backup"
	"github.com/carryover/carryover/persistence/sqlite"
)

// BackupS3 are backup.s3's options for s3:// targets.
func BackupS3(cfg *configs.Config) backup.S3Options {
	s := cfg.Backup.S3
	return backup.S3Options{Endpoint: s.Endpoint, Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey, PathStyle: s.PathStyle}
}

// startReplication starts the continuous backup of the SQLite store when backup.to is set (nil
// otherwise). A target that cannot be opened is a start-up error: a server configured to be backed
// up must not run silently without it.
func startReplication(ctx context.Context, cfg *configs.Config, store carryover.Store, log *slog.Logger) (*backup.Replicator, error) {
	if cfg.Backup.To == "" {
		return nil, nil
	}
	db, ok := store.(*sqlite.Store)
	if !ok {
		return nil, fmt.Errorf("backup.to: the store is not SQLite")
	}
	t, err := backup.Open(ctx, cfg.Backup.To, BackupS3(cfg))
	if err != nil {
		return nil, err
	}
	w, err := db.WatchChanges(ctx)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	r := &backup.Replicator{Source: db, Changed: w.Changed, Target: t, TmpDir: filepath.Join(cfg.DataDir, "backup-tmp"),
		Name: filepath.Join(cfg.DataDir, "carryover.db"), Interval: configs.Seconds(cfg.Backup.IntervalSeconds),
		Retention: time.Duration(cfg.Backup.RetentionHours * float64(time.Hour)), Log: log, OnClose: func() { w.Close() }}
	r.Start()
	log.Info("backup: replicating the store", "to", t.String(), "interval", r.Interval)
	return r, nil
}
