package server

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/persistence/postgres"
	"github.com/carryover/carryover/persistence/sqlite"
)

// openStore opens the backend store.driver names: the SQLite file under data_dir, or the PostgreSQL
// database of store.dsn. An unknown driver is an error, never a fallback to SQLite: a node of a cluster
// writing to a file of its own would silently split the cluster's state.
func openStore(ctx context.Context, cfg *configs.Config) (carryover.Store, error) {
	switch cfg.Store.Driver {
	case "sqlite":
		return sqlite.Open(filepath.Join(cfg.DataDir, "carryover.db"))
	case "postgres":
		return postgres.Open(ctx, cfg.Store.DSN, postgres.Options{})
	default:
		return nil, fmt.Errorf("store.driver must be sqlite or postgres, got %q", cfg.Store.Driver)
	}
}
