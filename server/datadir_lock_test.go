package server_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/server"
)

// TestDataDirIsLocked: a second server on a data dir in use refuses to start and names the holder;
// once the first has shut down, a server starts there again.
func TestDataDirIsLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	_, err := server.New(context.Background(), testConfig(dir), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another carryover") || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second server on a data dir in use: %v, want a refusal naming process %d", err, os.Getpid())
	}
	// The refused server changed nothing: the first still serves its session.
	ts.newSession(client.CreateRequest{SessionID: "kept"})
	ts.stop()
	srv, err := server.New(context.Background(), testConfig(dir), nil, nil)
	if err != nil {
		t.Fatalf("after the first server's shutdown: %v", err)
	}
	defer srv.Shutdown(context.Background())
	if _, err := srv.Svc.Get("kept"); err != nil {
		t.Fatalf("the session made before: %v", err)
	}
}
