package server

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/postgres"
	"github.com/carryover/carryover/persistence/s3"
	"github.com/carryover/carryover/persistence/sqlite"
)

// A cluster's store tells the checkpoint engine which format to stamp (the cluster's) and up to
// which it reads; without it every manifest would carry this binary's newest format, which an
// older node in a rolling upgrade cannot read.
var _ persistence.FormatStore = (*postgres.Store)(nil)

// openStore opens the backend store.driver names: the SQLite file under data_dir, or the PostgreSQL
// database of store.dsn (with large chunks in the object store of chunks.s3 when a bucket is set). An
// unknown driver is an error, never a fallback to SQLite: a node of a cluster writing to a file of its
// own would silently split the cluster's state.
func openStore(ctx context.Context, cfg *configs.Config) (carryover.Store, error) {
	switch cfg.Store.Driver {
	case "sqlite":
		sync, err := sqlite.ParseSynchronous(cfg.Store.SQLiteSynchronous)
		if err != nil {
			return nil, err
		}
		return sqlite.OpenWith(filepath.Join(cfg.DataDir, "carryover.db"), sqlite.Options{Synchronous: sync})
	case "postgres":
		opts := postgres.Options{InlineMax: cfg.Chunks.InlineMaxBytes, PackMax: cfg.Chunks.PackMaxBytes, Node: nodeInfo(cfg), MaxFormat: cfg.Cluster.TestMaxFormat}
		if opts.PackMax == 0 {
			opts.PackMax = -1 // the config's 0: no packs (the store's 0 is its default)
		}
		if o := cfg.Chunks.S3; o.Bucket != "" {
			b, err := s3.Open(ctx, s3.Options{Endpoint: o.Endpoint, Bucket: o.Bucket, Region: o.Region,
				AccessKey: o.AccessKey, SecretKey: o.SecretKey, PathStyle: o.PathStyle})
			if err != nil {
				return nil, err
			}
			opts.Objects = b
			if cfg.Chunks.CacheMaxBytes > 0 {
				opts.CacheDir, opts.CacheMaxBytes = filepath.Join(cfg.DataDir, "chunk-cache"), cfg.Chunks.CacheMaxBytes
			}
		}
		return postgres.Open(ctx, cfg.Store.DSN, opts)
	default:
		return nil, fmt.Errorf("store.driver must be sqlite or postgres, got %q", cfg.Store.Driver)
	}
}
