package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover/internal/sandboxtest"
)

// TestNewDisksUnmountsWhatAKilledServerLeft: a workspace disk a killed server left mounted (a kill -9
// unmounts nothing) is unmounted by the next server's Disks, and its files are back when the session
// is served again. Before, only the sessions the new server served again were adopted; in a cluster a
// session served elsewhere by then stayed mounted for good (the chaos harness's cluster run).
func TestNewDisksUnmountsWhatAKilledServerLeft(t *testing.T) {
	sandboxtest.Require(t, Probe)
	root := t.TempDir()
	images, ws := filepath.Join(root, "disks"), filepath.Join(root, "workspaces", "s1")
	first, err := NewDisks(images, 16<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.EnsureWorkspaceDisk(ws, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The first server dies: its refill ends, nothing is unmounted.
	first.mu.Lock()
	first.closed = true
	first.mu.Unlock()
	first.wg.Wait()
	t.Cleanup(func() { _ = first.Close() }) // only if the test failed: the mounts must not outlive it
	if mp, _ := isMountPoint(ws); !mp {
		t.Fatal("the workspace's disk is not mounted before the restart")
	}

	second, err := NewDisks(images, 16<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close() })
	if mp, _ := isMountPoint(ws); mp {
		t.Fatal("the killed server's workspace disk is still mounted after a new server started")
	}
	if err := second.EnsureWorkspaceDisk(ws, 0); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "kept.txt")); err != nil || string(b) != "kept" {
		t.Fatalf("the session's file after its disk was mounted again: %q, %v", b, err)
	}
}
