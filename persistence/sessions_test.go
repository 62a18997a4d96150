package persistence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

func TestSessionsCRUD(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"s2", "s1", "s3"} {
		r := carryover.SessionRecord{ID: id, ClientID: "c", State: "idle", Doc: []byte(`{"n":1}`), CreatedAt: t0.Add(time.Duration(i) * time.Second)}
		if err := s.CreateSession(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSession(ctx, carryover.SessionRecord{ID: "s1", State: "x"}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate create: %v, want ErrExists", err)
	}
	list, err := s.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].ID != "s2" || list[1].ID != "s1" || list[2].ID != "s3" {
		t.Fatalf("list order %+v", list)
	}

	upd := carryover.SessionRecord{ID: "s1", ClientID: "c", State: "running", Doc: []byte(`{"n":2}`), UpdatedAt: t0.Add(time.Hour)}
	if err := s.UpdateSession(ctx, upd); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "running" || string(got.Doc) != `{"n":2}` || !got.UpdatedAt.Equal(upd.UpdatedAt) || !got.CreatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("after update %+v", got)
	}
	if err := s.UpdateSession(ctx, carryover.SessionRecord{ID: "nope", State: "x"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
	if _, err := s.GetSession(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}

	byClient, err := s.SessionByClientID(ctx, "c")
	if err != nil || byClient.ID != "s1" {
		t.Fatalf("by client id: %+v %v, want s1 (most recently updated)", byClient, err)
	}
	if _, err := s.SessionByClientID(ctx, "other"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown client id: %v", err)
	}
	if _, err := s.SessionByClientID(ctx, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty client id: %v", err)
	}

	if err := s.DeleteSession(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "s2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if list, _ := s.ListSessions(ctx); len(list) != 2 {
		t.Fatalf("after delete %d sessions", len(list))
	}
}

func TestDeleteSessionCascades(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	sessionT(t, s, "b")
	for _, id := range []string{"a", "b"} {
		if _, err := s.AppendEvent(ctx, id, "x", map[string]int{"k": 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.InsertExecution(ctx, carryover.Execution{SessionID: id, Kind: "run", Code: "1", Status: "ok"}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutTool(ctx, carryover.Tool{SessionID: id, Name: "t", ToolType: "function"}); err != nil {
			t.Fatal(err)
		}
		c := rawChunkT(t, s, []byte("data of "+id))
		if err := s.CommitCheckpoint(ctx, carryover.Checkpoint{ID: "cp-" + id, SessionID: id, Roots: []string{c}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"events", "executions", "tools", "checkpoints"} {
		var n int
		if err := s.DB().Get(&n, `SELECT COUNT(*) FROM `+table+` WHERE session_id = 'a'`); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d rows of the deleted session", table, n)
		}
		if err := s.DB().Get(&n, `SELECT COUNT(*) FROM `+table+` WHERE session_id = 'b'`); err != nil || n != 1 {
			t.Errorf("%s: %d rows of the kept session (err %v)", table, n, err)
		}
	}
	var roots int
	if err := s.DB().Get(&roots, `SELECT COUNT(*) FROM checkpoint_roots WHERE checkpoint_id = 'cp-a'`); err != nil || roots != 0 {
		t.Fatalf("roots of deleted checkpoint: %d %v", roots, err)
	}
	// The chunk only "a" reached is now garbage.
	if n, _, err := s.GC(ctx); err != nil || n != 1 {
		t.Fatalf("gc after delete: %d chunks, %v", n, err)
	}
}
