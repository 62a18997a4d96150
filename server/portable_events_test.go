package server_test

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/servertest"
)

// TestExportImportEvents: an export with ?events=true carries the session's log and an import
// appends it, each event's type, payload and time kept, after the new session's own; an export
// without it carries none; ?events= that is not a boolean is 400 and exports nothing.
func TestExportImportEvents(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := t.Context()
	id := servertest.ID(t)
	if _, err := ts.c.CreateSession(ctx, client.CreateRequest{SessionID: id}); err != nil {
		t.Fatal(err)
	}
	if r, err := ts.c.Run(ctx, id, client.RunRequest{Code: "x = 1"}); err != nil || r.Status != "ok" {
		t.Fatalf("%v %+v", err, r)
	}
	var withEvents, without bytes.Buffer
	if err := ts.c.ExportSessionWith(ctx, id, client.ExportOptions{Events: true}, &withEvents); err != nil {
		t.Fatal(err)
	}
	src, err := ts.c.Events(ctx, id, 0, 0, "") // the log as the export read it (its checkpoint's event included)
	if err != nil || len(src) < 2 {
		t.Fatalf("the source's log: %d events (%v)", len(src), err)
	}
	if err := ts.c.ExportSession(ctx, id, "", &without); err != nil {
		t.Fatal(err)
	}
	res, err := ts.c.ImportSession(ctx, bytes.NewReader(withEvents.Bytes()), id+"-ev")
	if err != nil || res.Events != len(src) {
		t.Fatalf("import with events: %v, %d events imported of %d", err, res.Events, len(src))
	}
	got, err := ts.c.Events(ctx, id+"-ev", 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	tail := got[len(got)-len(src):] // the new session's own come first
	for i, ev := range src {
		g := tail[i]
		if g.EventType != ev.EventType || !bytes.Equal(g.Payload, ev.Payload) || !g.CreatedAt.Equal(ev.CreatedAt) {
			t.Fatalf("event %d came back as %s %s %s, want %s %s %s", i, g.EventType, g.Payload, g.CreatedAt, ev.EventType, ev.Payload, ev.CreatedAt)
		}
	}
	if res, err := ts.c.ImportSession(ctx, bytes.NewReader(without.Bytes()), id+"-plain"); err != nil || res.Events != 0 {
		t.Fatalf("import without events: %v %+v", err, res)
	}
	var e *client.Error
	var none bytes.Buffer
	err = ts.c.Do(ctx, http.MethodGet, "/api/sessions/"+id+"/export?events=maybe", nil, &none)
	if !errors.As(err, &e) || e.Status != 400 || none.Len() != 0 {
		t.Fatalf("?events=maybe: %v (%d bytes)", err, none.Len())
	}
}
