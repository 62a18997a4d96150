package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// sharedInode is Python answering the inode of the memfd big's memory is mapped from (0: none).
const sharedInode = `(lambda a: ([int(f[4]) for f in (l.split() for l in open('/proc/self/maps'))
  if int(f[0].split('-')[0], 16) <= a < int(f[0].split('-')[1], 16) and f[5:6] == ['/memfd:carryover-buf']] + [0])[0])(
  big.__array_interface__['data'][0])`

// TestForkFanOutSharesBuffers: two sandboxed children of a session holding a 64 MiB array map
// one copy of it (the same memfd); a write in one is seen by no sibling nor the parent (that its
// checkpoint restores it: TestSharedBuffersCopyOnWrite); the copy lives while a child maps it, and no process holds it once
// the server stopped (a restart leaks nothing: the copy is memory, never a file).
func TestForkFanOutSharesBuffers(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.newSession(client.CreateRequest{SessionID: "src"})
	ts.run("src", "import numpy as np\nbig = np.random.default_rng(3).random(8 << 20)  # 64 MiB\nfirst = float(big[0])\ntotal = float(big.sum())")
	kids := must(t, 201, "fork", func(ctx context.Context) ([]client.Session, error) {
		return ts.c.ForkMany(ctx, "src", client.ForkRequest{Count: 2, SessionID: "kid"})
	})
	var ino string
	for _, k := range kids {
		got := resultOf(ts.run(k.ID, "(float(big.sum()) == total, "+sharedInode+")"))
		if !strings.HasPrefix(got, "(True, ") || strings.HasSuffix(got, " 0)") || (ino != "" && got != ino) {
			t.Fatalf("child %s: (sum equal, memfd inode) = %s; the first child: %s", k.ID, got, ino)
		}
		ino = got
	}
	waitSharedCountedOnce(t, ts, []string{"src", "kid-1", "kid-2"}, 64<<20)
	ts.run("kid-1", "big[0] = -1.0")
	for _, id := range []string{"kid-2", "src"} {
		if got := resultOf(ts.run(id, "(float(big[0]) == first, float(big.sum()) == total)")); got != "(True, True)" {
			t.Fatalf("%s after kid-1 wrote: %s", id, got)
		}
	}
	inode := strings.TrimSuffix(ino[strings.LastIndex(ino, " ")+1:], ")")
	mustDo(t, 204, "delete kid-1", func(ctx context.Context) error { return ts.c.DeleteSession(ctx, "kid-1") })
	if !memfdHeld(t, inode) {
		t.Fatalf("the copy kid-2 maps was released with its sibling")
	}
	ts.stop() // what a restart does first: no process holds the copy any more
	waitMemfdGone(t, inode)
}

// waitSharedCountedOnce waits until the memory watch's figure for the node's kernels (GET
// /api/status memory.kernel_bytes) holds the copy of size bytes and is below the sum of their RSS
// (each session's usage memory_bytes) by more than half of it: two children each map the one copy,
// which the watch counts once.
// Summing RSS (the old figure) counts it twice, and a fan-out of 100 children of a 1 GiB array
// "filled" a 24 GiB node.
func waitSharedCountedOnce(t *testing.T, ts *testServer, ids []string, size int64) {
	t.Helper()
	var rss, watched int64
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rss = 0
		for _, id := range ids {
			u, err := ts.c.Usage(ts.ctx(), id)
			if err != nil {
				t.Fatal(err)
			}
			rss += u.MemoryBytes
		}
		st, err := ts.c.Status(ts.ctx())
		if err != nil {
			t.Fatal(err)
		}
		// At least the copy, and not the copy in each child. (Less than the RSS by more than the copy
		// too: a kernel forked from the template counts its box's charge, not the template's pages.)
		if watched = st.Memory.KernelBytes; watched >= size && rss-watched > size/2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernels' RSS %d MiB, the memory watch counts %d MiB: want the shared %d MiB copy counted once",
				rss>>20, watched>>20, size>>20)
		}
	}
}

// memfdHeld reports whether any process maps or holds a descriptor of the memfd inode.
func memfdHeld(t *testing.T, inode string) bool {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if b, err := os.ReadFile(p + "/maps"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 6 && f[4] == inode && f[5] == "/memfd:carryover-buf" {
					return true
				}
			}
		}
		fds, _ := os.ReadDir(p + "/fd")
		for _, fd := range fds {
			var st syscall.Stat_t
			fp := filepath.Join(p, "fd", fd.Name())
			if l, _ := os.Readlink(fp); strings.HasPrefix(l, "/memfd:carryover-buf") && syscall.Stat(fp, &st) == nil && fmt.Sprint(st.Ino) == inode {
				return true
			}
		}
	}
	return false
}

// waitMemfdGone waits until no process holds the memfd inode.
func waitMemfdGone(t *testing.T, inode string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); memfdHeld(t, inode); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("memfd %s still held after its kernels and server are gone", inode)
		}
	}
}

// TestMemoryWatchCountsAForkedKernelsOwnMemory: a session's kernel forked from the template into
// its box is counted by the node's memory watch (GET /api/status memory.kernel_bytes) what its box
// is charged, well under its RSS (usage memory_bytes), which holds the template's pages it maps.
func TestMemoryWatchCountsAForkedKernelsOwnMemory(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.newSession(client.CreateRequest{SessionID: "own"})
	if got := resultOf(ts.run("own", "1+1")); got != "2" {
		t.Fatalf("1+1 = %q", got)
	}
	var rss, watched int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		u, err := ts.c.Usage(ts.ctx(), "own")
		if err != nil {
			t.Fatal(err)
		}
		st, err := ts.c.Status(ts.ctx())
		if err != nil {
			t.Fatal(err)
		}
		rss, watched = u.MemoryBytes, st.Memory.KernelBytes
		if rss > 0 && watched > 0 && watched < rss*3/4 {
			t.Logf("the watch counts %d MiB of the kernel's %d MiB RSS", watched>>20, rss>>20)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the memory watch counts %d MiB for a forked kernel of %d MiB RSS: want its box's charge, under 3/4 of it",
				watched>>20, rss>>20)
		}
	}
}
