package persistence

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/format"
)

// formatStore is the store of a cluster node (FormatStore): write is the format the cluster
// writes now, max the newest this node reads.
type formatStore struct {
	carryover.CheckpointStore
	write, max int
}

func (s formatStore) Format() int    { return s.write }
func (s formatStore) MaxFormat() int { return s.max }

// The manifest carries the format the cluster writes, not the binary's newest: a node that reads
// one format more (the next build) writes the old format while an old node lives, which the old
// node reads; once the cluster switched it writes the new one, and a node that reads only the old
// format refuses that checkpoint naming both versions, rather than misreading it.
func TestManifestStampsTheClusterFormat(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	sid := mustSession(t, st, "s")
	next := format.Newest + 1
	turn := 0
	commit := func(c *Checkpointer) carryover.Checkpoint {
		t.Helper()
		p, err := c.Prepare(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		turn++
		res, err := c.checkpointOnce(ctx, nil, p, turn, "", &snapshotAnswer{Groups: []ManifestGroup{{Kind: "imp", Names: []string{"os"}, Module: "os"}}})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := st.GetCheckpoint(ctx, sid, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	old := &Checkpointer{Store: st} // this binary on its own: reads and writes format.Newest

	mixed := &Checkpointer{Store: formatStore{st, format.Newest, next}}
	cp := commit(mixed)
	m, err := old.ParseManifest(cp)
	if err != nil || m.V != format.Newest {
		t.Fatalf("written beside an old node: format %v (%v), want %d, read by the old node", m, err, format.Newest)
	}
	if got := old.Variables(cp); len(got) != 1 || got[0] != "os" {
		t.Fatalf("the old node lists %v", got)
	}

	upgraded := &Checkpointer{Store: formatStore{st, next, next}}
	cp = commit(upgraded)
	if m, err := upgraded.ParseManifest(cp); err != nil || m.V != next {
		t.Fatalf("written after the switch: %+v (%v), want format %d", m, err, next)
	}
	if got := upgraded.Variables(cp); len(got) != 1 || got[0] != "os" {
		t.Fatalf("the new node lists %v", got)
	}
	_, err = old.Restore(ctx, nil, sid, "", "", false)
	for _, want := range []string{"checkpoint " + cp.ID + " is checkpoint format " + strconv.Itoa(next),
		"newer than this carryover reads (formats " + strconv.Itoa(format.Oldest) + " to " + strconv.Itoa(format.Newest) + ")"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("an old node restoring a format-%d checkpoint: %v (want %q)", next, err, want)
		}
	}
	if got := old.Summarize(cp).Variables; len(got) != 0 {
		t.Fatalf("the old node's list shows %v of a checkpoint it cannot read", got)
	}
}
