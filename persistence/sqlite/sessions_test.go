package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestSessionByClientID: the most recently updated session with the client id; none for "".
func TestSessionByClientID(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"s2", "s1", "s3"} {
		r := carryover.SessionRecord{ID: id, ClientID: "c", State: "idle", CreatedAt: t0, UpdatedAt: t0.Add(time.Duration(i) * time.Second)}
		if id == "s1" {
			r.UpdatedAt = t0.Add(time.Hour)
		}
		if err := s.CreateSession(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	byClient, err := s.SessionByClientID(ctx, "c")
	if err != nil || byClient.ID != "s1" {
		t.Fatalf("by client id: %+v %v, want s1 (most recently updated)", byClient, err)
	}
	if _, err := s.SessionByClientID(ctx, "other"); !errors.Is(err, carryover.ErrNotFound) {
		t.Fatalf("unknown client id: %v", err)
	}
	if _, err := s.SessionByClientID(ctx, ""); !errors.Is(err, carryover.ErrNotFound) {
		t.Fatalf("empty client id: %v", err)
	}
}

// TestDeleteSessionCascades: the foreign-key cascades leave no row of a deleted session in any table
// (storetest checks what the API shows; this checks the file).
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
		commitT(t, s, carryover.Checkpoint{ID: "cp-" + id, SessionID: id, Roots: []string{c}})
	}
	if err := s.DeleteSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"events", "executions", "tools", "checkpoints"} {
		var n int
		if err := s.db.Get(&n, `SELECT COUNT(*) FROM `+table+` WHERE session_id = 'a'`); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d rows of the deleted session", table, n)
		}
		if err := s.db.Get(&n, `SELECT COUNT(*) FROM `+table+` WHERE session_id = 'b'`); err != nil || n != 1 {
			t.Errorf("%s: %d rows of the kept session (err %v)", table, n, err)
		}
	}
	var roots int
	if err := s.db.Get(&roots, `SELECT COUNT(*) FROM checkpoint_roots WHERE checkpoint_id = 'cp-a'`); err != nil || roots != 0 {
		t.Fatalf("roots of deleted checkpoint: %d %v", roots, err)
	}
}
