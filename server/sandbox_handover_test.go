package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/configs"
)

// TestHandoverSkipsCheckpointOnlyWhenSaved: a handover (a draining cluster node giving a session
// up) takes no checkpoint when the turn's own one still holds everything (session/saved.go), and
// takes one whenever something could have changed since: a thread or an asyncio callback the
// session left running, a process of its own, a file written through the API, a message to the
// kernel. A session whose state changed after its turn comes back (adopted, restored from the
// store, as the next owner does) with what its kernel held at the handover.
func TestHandoverSkipsCheckpointOnlyWhenSaved(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t, func(c *configs.Config) { c.Pool.Size = 3 })
	cases := []struct {
		id, after string // code run after `x = 1`, its own turn (and its own checkpoint)
		between   func(id string)
		skip      bool
		want      string // printed by a run after the handover ("": not checked)
	}{
		{id: "ho-quiet", skip: true, want: "1 None"},
		{id: "ho-thread", after: "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), globals().__setitem__('y', 2))).start()",
			want: "1 2"},
		{id: "ho-later", after: "import asyncio\nasyncio.get_event_loop().call_later(0.2, lambda: globals().__setitem__('y', 3))",
			want: "1 3"},
		{id: "ho-proc", after: "import subprocess\np = subprocess.Popen(['sleep', '30'])"},
		{id: "ho-file", between: func(id string) {
			if _, err := ts.c.PutFile(ts.ctx(), id, "note.txt", []byte("hi")); err != nil {
				t.Fatal(err)
			}
		}},
		{id: "ho-complete", between: func(id string) {
			if _, err := ts.c.Complete(ts.ctx(), id, "x.", 2); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		ts.create(c.id, nil)
		ts.run(c.id, "x = 1")
		if c.after != "" {
			ts.run(c.id, c.after)
		}
		if c.between != nil {
			c.between(c.id)
		}
	}
	time.Sleep(400 * time.Millisecond) // the threads and callbacks have run
	for _, c := range cases {
		before := latestCheckpoint(ts, c.id)
		if ok, err := ts.srv.Svc.Handover(ts.ctx(), c.id); !ok || err != nil {
			t.Fatalf("%s: handover = %v, %v", c.id, ok, err)
		}
		cp, err := ts.srv.Store.LatestCheckpoint(ts.ctx(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if skipped := cp.ID == before; skipped != c.skip {
			t.Errorf("%s: handover skipped its checkpoint: %v, want %v", c.id, skipped, c.skip)
		}
	}
	for _, c := range cases {
		if c.want == "" {
			continue
		}
		if err := ts.srv.Svc.Adopt(ts.ctx(), c.id); err != nil { // as the next owner does
			t.Fatal(err)
		}
		if got := strings.TrimSpace(ts.stdout(c.id, "print(x, globals().get('y'))")); got != c.want {
			t.Errorf("%s: after the handover the session printed %q, want %q", c.id, got, c.want)
		}
	}
}

// latestCheckpoint is the id of session id's newest checkpoint.
func latestCheckpoint(ts *testServer, id string) string {
	ts.t.Helper()
	cps, err := ts.c.Checkpoints(ts.ctx(), id)
	if err != nil || len(cps) == 0 {
		ts.t.Fatalf("%s: checkpoints: %v (%d)", id, err, len(cps))
	}
	return cps[0].ID
}
