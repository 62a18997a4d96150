package configs

import (
	"strings"
	"testing"
)

// TestStoreDriver: sqlite is the default; postgres needs a dsn; any other driver is refused at load,
// never replaced by SQLite.
func TestStoreDriver(t *testing.T) {
	if c := Default(); c.Store.Driver != "sqlite" || c.Store.DSN != "" {
		t.Fatalf("default store %+v, want sqlite without dsn", c.Store)
	}
	t.Setenv("CARRYOVER_STORE_DRIVER", "postgres")
	if _, err := Load("", nil); err == nil || !strings.Contains(err.Error(), "store.dsn") {
		t.Fatalf("postgres without dsn: %v, want an error naming store.dsn", err)
	}
	t.Setenv("CARRYOVER_STORE_DSN", "postgres://db/carryover")
	if c, err := Load("", nil); err != nil || c.Store.Driver != "postgres" || c.Store.DSN != "postgres://db/carryover" {
		t.Fatalf("postgres with dsn: %+v, %v", c, err)
	}
	t.Setenv("CARRYOVER_STORE_DRIVER", "mysql")
	if _, err := Load("", nil); err == nil || !strings.Contains(err.Error(), `store.driver must be sqlite or postgres, got "mysql"`) {
		t.Fatalf("unknown driver: %v, want a start-up error", err)
	}
}
