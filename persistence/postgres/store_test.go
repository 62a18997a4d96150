package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/persistence/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// storeT opens a store on a fresh database of the package's PostgreSQL and closes it when t ends.
func storeT(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), pgtest.NewDB(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStore runs the contract every carryover.Store backend passes, on a fresh database per subtest.
func TestStore(t *testing.T) {
	storetest.RunStoreTests(t, func(t *testing.T) carryover.Store {
		s, err := Open(context.Background(), pgtest.NewDB(t), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
