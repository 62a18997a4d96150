package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// TestSandboxDiskQuota: a workspace is its own file system of sandbox.disk bytes and
// sandbox.disk_inodes files: past either, Python gets ENOSPC, the files so far stay and are
// checkpointed, and another session still has all of its own space.
func TestSandboxDiskQuota(t *testing.T) {
	t.Parallel()
	disk := func(c *configs.Config) { c.Sandbox.Disk, c.Sandbox.DiskInodes = "64Mi", 2000 }
	ts := sandboxed(t, disk)
	// Spare images are made and mounted ahead, so a new workspace need not wait for mkfs.
	spares := func() int { m, _ := filepath.Glob(filepath.Join(ts.dir, "disks", "spare-*.img")); return len(m) }
	waitFor(t, 60*time.Second, "spare disk images", func() bool { return spares() == 2 })
	ts.create("dq", nil)
	ts.create("other", nil)
	fill := `import os
def fill(name, mb):
    try:
        with open(name, 'wb') as f:
            for _ in range(mb):
                f.write(b'x' * (1 << 20)); f.flush(); os.fsync(f.fileno())
        return 'ok'
    except OSError as e:
        return 'errno %d' % e.errno
`
	if out := ts.stdout("dq", fill+"print(fill('a.bin', 40), os.path.getsize('a.bin') >> 20)"); out != "ok 40" {
		t.Fatalf("40 MiB in a 64 MiB workspace: %q", out)
	}
	if out := ts.stdout("dq", fill+"print(fill('b.bin', 40))"); out != "errno 28" {
		t.Errorf("past the quota: %q, want ENOSPC", out)
	}
	r := ts.run("dq", "import os\nos.remove('b.bin')\nprint(os.path.getsize('a.bin') >> 20, sorted(os.listdir('.')))")
	if strings.TrimSpace(r.Stdout) != "40 ['a.bin']" || r.Checkpoint == nil {
		t.Errorf("files kept and checkpointed after ENOSPC: %s", dump(r))
	}
	inodes := "import os\nos.makedirs('many', exist_ok=True)\nn = 0\ntry:\n    for i in range(5000):\n        open('many/%d' % i, 'w').close(); n += 1\nexcept OSError as e:\n    print('errno', e.errno, n < 2000)"
	if out := ts.stdout("dq", inodes); out != "errno 28 True" {
		t.Errorf("past the inode cap: %q", out)
	}
	if out := ts.stdout("other", fill+"print(fill('c.bin', 40))"); out != "ok" {
		t.Errorf("another session's space: %q", out)
	}
	if _, err := os.Stat(filepath.Join(ts.dir, "disks", "dq.img")); err != nil {
		t.Errorf("image: %v", err)
	}
	waitFor(t, 60*time.Second, "spares made again", func() bool { return spares() == 2 })
	// A restart finds the files in the image; a server without the sandbox refuses the workspace
	// instead of showing it empty (its files would be pruned from the next checkpoint).
	ts.stop()
	on := func(c *configs.Config) { c.Sandbox.Enabled, c.Sandbox.UIDBase, c.Pool.Size = true, 240000, 2 }
	ts = startServer(t, ts.dir, on, disk)
	if out := ts.stdout("dq", "import os\nprint(os.path.getsize('a.bin') >> 20)"); out != "40" {
		t.Errorf("after a restart: %q", out)
	}
	ts.stop()
	off := startServer(t, ts.dir)
	_, err := off.c.ListFiles(off.ctx(), "dq")
	if ae, ok := err.(*client.Error); !ok || ae.Status != 500 || !strings.Contains(ae.Message, "disk image") {
		t.Errorf("files of a disk workspace without the sandbox: %v", err)
	}
	off.stop()
	ts = startServer(t, ts.dir, on, disk)
	if err := ts.c.DeleteSession(ts.ctx(), "dq"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ts.dir, "disks", "dq.img")); !os.IsNotExist(err) {
		t.Errorf("image of a deleted session: %v", err)
	}
}
