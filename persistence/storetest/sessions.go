package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// testSessionsCRUD: create, conflict on a taken id, list oldest first, update, get, delete, and
// not found for every operation on a missing session.
func testSessionsCRUD(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"s2", "s1", "s3"} {
		r := carryover.SessionRecord{ID: id, ClientID: "c", State: "idle", Doc: []byte(`{"n":1}`), CreatedAt: t0.Add(time.Duration(i) * time.Second)}
		if err := s.CreateSession(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, "create twice", s.CreateSession(ctx, carryover.SessionRecord{ID: "s1", State: "x"}), carryover.CodeConflict)
	list, err := s.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].ID != "s2" || list[1].ID != "s1" || list[2].ID != "s3" {
		t.Fatalf("list order %+v, want s2 s1 s3 (oldest first)", list)
	}

	upd := carryover.SessionRecord{ID: "s1", ClientID: "c2", State: "running", Doc: []byte(`{"n":2}`), UpdatedAt: t0.Add(time.Hour)}
	if err := s.UpdateSession(ctx, upd); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "running" || got.ClientID != "c2" || string(got.Doc) != `{"n":2}` || !got.UpdatedAt.Equal(upd.UpdatedAt) ||
		!got.CreatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("after update %+v", got)
	}
	wantCode(t, "update missing", s.UpdateSession(ctx, carryover.SessionRecord{ID: "nope", State: "x"}), carryover.CodeNotFound)
	_, err = s.GetSession(ctx, "nope")
	wantCode(t, "get missing", err, carryover.CodeNotFound)

	if err := s.DeleteSession(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "delete twice", s.DeleteSession(ctx, "s2"), carryover.CodeNotFound)
	if list, _ := s.ListSessions(ctx); len(list) != 2 || list[0].ID != "s1" {
		t.Fatalf("after delete %+v", list)
	}
}

// testSessionsZeroTimes: zero times mean now, and times come back as the same instant.
func testSessionsZeroTimes(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	if err := s.CreateSession(ctx, carryover.SessionRecord{ID: "z", State: "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetSession(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	if r.CreatedAt.Before(before) || r.UpdatedAt.Before(before) {
		t.Fatalf("zero times stored as %v / %v", r.CreatedAt, r.UpdatedAt)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("x", 3600))
	if err := s.CreateSession(ctx, carryover.SessionRecord{ID: "t", State: "x", CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetSession(ctx, "t"); err != nil || !r.CreatedAt.Equal(at) || !r.UpdatedAt.Equal(at) {
		t.Fatalf("times %v %v (err %v), want %v", r.CreatedAt, r.UpdatedAt, err, at)
	}
}
