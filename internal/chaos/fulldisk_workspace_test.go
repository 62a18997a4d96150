package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/sandboxtest"
	"github.com/carryover/carryover/internal/servertest"
)

// abortTurn is a turn that sets a = 2, then makes directories and files in the workspace and
// fsyncs each directory (a journal commit) until the file system fails: on a full host a commit
// needs journal blocks the sparse image has not got, and ext4 aborts its journal.
const abortTurn = `import os
a = 2
err = None
for i in range(400):
    try:
        os.makedirs(f'd{i}', exist_ok=True)
        for j in range(20):
            open(f'd{i}/{j}', 'w').close()
        fd = os.open(f'd{i}', os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        err = e
        if e.errno == 30:
            break
print(repr(err))`

// TestFullDiskWorkspace: with the sandbox's workspace disks (sparse images in the data dir), a
// full data dir aborts a session's workspace file system (the chaos harness's full-disk fault
// left such sessions read-only for good: every later checkpoint failed). While the host is full
// the turns run and their checkpoint_error says why, the session's live state untouched; the
// first turn once there is room repairs the disk and restores the last checkpoint, named in its
// answer, with the files synced before.
func TestFullDiskWorkspace(t *testing.T) {
	t.Parallel()
	env, sandbox := sandboxEnv()
	if !sandbox {
		sandboxtest.Missing(t, "the workspace disks need the sandbox (root and bubblewrap)")
	}
	dir := smallDisk(t, "400m")
	p := servertest.StartProcess(t, servertest.Options{Token: "fdws", Dir: dir,
		Flags: []string{"--pool.size", "0"},
		Env:   append(env, "CARRYOVER_PERSISTENCE_SPOOL_DIR="+filepath.Join(dir, "spool"))})
	c := client.New(p.Base, p.Token)
	ctx := t.Context()
	if _, err := c.CreateSession(ctx, client.CreateRequest{SessionID: "fdws"}); err != nil {
		t.Fatal(err)
	}
	run := func(code string) *client.RunResult {
		t.Helper()
		res, err := c.Run(ctx, "fdws", client.RunRequest{Code: code})
		if err != nil {
			t.Fatalf("run %q: %v", code, err)
		}
		return res
	}
	if res := run("a = 1\nwith open('kept.txt', 'w') as f: f.write('one')"); res.Status != "ok" || res.CheckpointError != "" {
		t.Fatalf("first turn: %+v", res)
	}
	filler := filepath.Join(dir, "filler")
	sandboxtest.FillDisk(t, filler)
	res := run(abortTurn)
	t.Logf("the turn on a full host: %s %q, checkpoint_error %q", res.Status, res.Stdout, res.CheckpointError)
	if !strings.Contains(res.Stdout, "Read-only file system") {
		t.Fatalf("the workspace's file system did not fail on the full host: %+v", res)
	}
	const why = "lost writes to an I/O error of the host"
	// Which turn's checkpoint the repair restores depends on when the journal aborted. Most often
	// the turn's own writes abort it: the files it made are in the page cache, not on the image, so
	// its checkpoint (and the next one's) cannot sync them and says why; the repair restores turn 1.
	// But a write of the host's own after the fill (ext4's background inode-table zeroing, a timed
	// commit) may abort it before the turn writes anything: then no file changed, its checkpoint is
	// exact and commits, and so does the next (the live state, a = 2, is saved); the repair
	// restores the newest.
	early := res.CheckpointError == ""
	if early && (res.Checkpoint == nil || res.Checkpoint.FilesSaved != 0) {
		t.Fatalf("a checkpoint that saved workspace files on a failed disk, or none and no error: %+v", res)
	}
	if !early && !strings.Contains(res.CheckpointError, why) {
		t.Fatalf("the turn's checkpoint_error does not say why: %q", res.CheckpointError)
	}
	// Still full: nothing changes, the live state is kept and the answer says why.
	res = run("print(a)")
	if strings.TrimSpace(res.Stdout) != "2" || res.Restore != nil || early != (res.CheckpointError == "") ||
		(!early && !strings.Contains(res.CheckpointError, why)) {
		t.Fatalf("a turn while the host is still full: %+v", res)
	}
	wantTurn, wantA := 1, "1"
	if early {
		wantTurn, wantA = res.Checkpoint.Turn, "2"
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	res = run("print(a, open('kept.txt').read())\nwith open('after.txt', 'w') as f: f.write('after')")
	if res.Status != "ok" || res.CheckpointError != "" || res.Checkpoint == nil {
		t.Fatalf("the first turn once there is room: %+v", res)
	}
	if strings.TrimSpace(res.Stdout) != wantA+" one" || res.Restore == nil || res.Restore.Turn != wantTurn {
		t.Fatalf("the first turn once there is room: want the checkpoint of turn %d restored and named, got %q, restore %+v", wantTurn, res.Stdout, res.Restore)
	}
	t.Logf("restore report: %+v", res.Restore)
	evs, err := c.Events(ctx, "fdws", 0, 200, "sandbox_terminated")
	if err != nil || len(evs) == 0 || !strings.Contains(string(evs[len(evs)-1].Payload), why) {
		t.Fatalf("no sandbox_terminated event naming the repair: %+v %v", evs, err)
	}
	if b, err := c.GetFile(ctx, "fdws", "after.txt"); err != nil || string(b) != "after" {
		t.Fatalf("a file written after the repair: %q %v", b, err)
	}
}
