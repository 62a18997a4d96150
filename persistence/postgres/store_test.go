package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/persistence/s3"
	"github.com/carryover/carryover/persistence/storetest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	s3test.Main()
	os.Exit(code)
}

// storeT opens a store on a fresh database of the package's PostgreSQL and closes it when t ends.
func storeT(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), pgtest.NewDB(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// bucketT opens a new bucket on the package's gateway, reached at endpoint ("" = directly).
func bucketT(t testing.TB, endpoint string) *s3.Bucket {
	t.Helper()
	gw := s3test.Shared(t)
	if endpoint == "" {
		endpoint = gw.Endpoint
	}
	b, err := s3.Open(context.Background(), s3.Options{Endpoint: endpoint, Bucket: s3test.NewBucket(),
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	return b
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

// TestStoreWithObjects runs the same contract with chunks over 1 KiB in a real S3 server (Versity
// Gateway) and a node-local cache: the contract holds whichever half of the store a chunk lives in.
func TestStoreWithObjects(t *testing.T) {
	storetest.RunStoreTests(t, func(t *testing.T) carryover.Store {
		s, err := Open(context.Background(), pgtest.NewDB(t), Options{Objects: bucketT(t, ""), InlineMax: 1024,
			CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
