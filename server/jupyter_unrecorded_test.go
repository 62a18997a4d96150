package server_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/persistence/sqlite"
	"github.com/carryover/carryover/server"
)

// failingHistory is SQLite with the history's writes failing while fail is set: a turn whose
// record is not (fully) written, as on a node whose write lost to the session's new owner.
type failingHistory struct {
	carryover.Store
	fail atomic.Bool
}

func (f *failingHistory) InsertExecution(ctx context.Context, e carryover.Execution) (int64, error) {
	if f.fail.Load() {
		return 0, errors.New("the history is unavailable (injected)")
	}
	return f.Store.InsertExecution(ctx, e)
}

// TestJupyterUnrecordedTurnIsNotAnsweredOK: a Jupyter client whose cell's record was not written is
// told so on a stderr notice, and the same request sent again is answered with an error that names
// why, never with an "ok" that no store holds (the chaos harness found a re-sent request answered ok
// from the door's memory while the session came back a turn earlier).
func TestJupyterUnrecordedTurnIsNotAnsweredOK(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inner, err := sqlite.Open(filepath.Join(dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	store := &failingHistory{Store: inner}
	base := serveParts(t, dir, server.Parts{Store: store})
	_, w := openJupyterKernel(t, base)
	content := map[string]any{"code": "x = 1", "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true}
	store.fail.Store(true)
	id := w.sendAs("unrecorded-cell", "shell", "execute_request", content)
	reply, msgs := w.until(id)
	store.fail.Store(false)
	if reply.Content["status"] != "ok" {
		t.Fatalf("the cell itself: %v", reply.Content)
	}
	if !strings.Contains(stderrOf(msgs), "record was not written") {
		t.Errorf("no notice that the cell's record was not written: %q", stderrOf(msgs))
	}
	w.sendAs(id, "shell", "execute_request", content)
	again, _ := w.until(id)
	if again.Content["status"] == "ok" || again.Content["ename"] != "CarryoverNotRecorded" ||
		!strings.Contains(again.Content["evalue"].(string), "injected") {
		t.Fatalf("the request sent again: %v, want an error naming the write that failed", again.Content)
	}
}

// serveParts serves a server assembled on dir with parts until the test ends; it returns its base URL.
func serveParts(t *testing.T, dir string, parts server.Parts) string {
	t.Helper()
	_, base := serveServer(t, dir, parts)
	return base
}

// serveServer is serveParts that also gives the server (a test reaches its session service).
func serveServer(t *testing.T, dir string, parts server.Parts) (*server.Server, string) {
	t.Helper()
	return serveConfig(t, testConfig(dir), parts)
}

// serveConfig is serveServer on a config of the test's own.
func serveConfig(t *testing.T, cfg *configs.Config, parts server.Parts) (*server.Server, string) {
	t.Helper()
	srv, err := server.Assemble(context.Background(), cfg, parts)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return srv, "http://" + srv.Addr()
}
