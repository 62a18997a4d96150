package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover/internal/sandboxtest"
)

// TestHealWorkspaceDiskAfterAFullHost: a workspace image on a host file system that fills up gets
// its journal aborted by a write the host cannot hold (the chaos harness's full-disk fault), and
// ext4 keeps it read-only after the host has room again. HealWorkspaceDisk changes nothing while
// the host is full, and once there is room it makes the workspace writable again with the files
// synced before the abort. Before, nothing repaired it: read-only until the server stopped.
func TestHealWorkspaceDiskAfterAFullHost(t *testing.T) {
	host, ws, d := workspaceOnSmallHost(t)

	filler := filepath.Join(host, "filler")
	sandboxtest.FillDisk(t, filler)
	abortJournal(t, ws, func() bool { return d.WorkspaceDiskFailed(ws) })
	if _, err := os.Create(filepath.Join(ws, "new.txt")); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("a write to the aborted workspace: %v, want EROFS", err)
	}
	released := 0
	if healed, err := d.HealWorkspaceDisk(ws, func() { released++ }); healed || !errors.Is(err, ErrHostFull) || released != 0 {
		t.Fatalf("a repair on the full host: healed %v, err %v, released %d: want ErrHostFull and nothing done", healed, err, released)
	}
	if !d.WorkspaceDiskFailed(ws) {
		t.Fatal("the workspace is no longer reported failed after a refused repair")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Create(filepath.Join(ws, "new.txt")); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("before the repair, with room on the host: %v, want EROFS (ext4 stays read-only)", err)
	}
	healed, err := d.HealWorkspaceDisk(ws, func() { released++ })
	if err != nil || !healed || released != 1 {
		t.Fatalf("the repair once there is room: healed %v, err %v, released %d", healed, err, released)
	}
	if d.WorkspaceDiskFailed(ws) {
		t.Fatal("the repaired workspace is still reported failed")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "kept.txt")); err != nil || string(b) != "kept" {
		t.Fatalf("the file synced before the abort: %q, %v", b, err)
	}
	writeSynced(t, filepath.Join(ws, "after.txt"), []byte("after"))
	if healed, err := d.HealWorkspaceDisk(ws, func() { t.Error("released a healthy workspace") }); healed || err != nil {
		t.Fatalf("a healthy workspace: healed %v, err %v", healed, err)
	}
}

// TestFailedSpareNotHandedOut: a spare image whose journal a full host aborted while it waited
// (its first commits need journal blocks the sparse image has not got) is thrown away, not given
// to a new session as a read-only workspace.
func TestFailedSpareNotHandedOut(t *testing.T) {
	sandboxtest.Require(t, Probe)
	host := hostDisk(t, "96m")
	d, err := NewDisks(filepath.Join(host, "disks"), 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	var spares []string
	for deadline := time.Now().Add(30 * time.Second); len(spares) < spareCount; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no spares after 30 s")
		}
		d.mu.Lock()
		spares = slices.Clone(d.spares)
		d.mu.Unlock()
	}
	filler := filepath.Join(host, "filler")
	sandboxtest.FillDisk(t, filler)
	for _, sp := range spares {
		abortJournal(t, sp+".d", func() bool { return hasErrors(sp + ".d") })
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "s1")
	if err := d.EnsureWorkspaceDisk(ws, 0); err != nil {
		t.Fatal(err)
	}
	if d.WorkspaceDiskFailed(ws) {
		t.Fatal("a new workspace got a failed spare")
	}
	writeSynced(t, filepath.Join(ws, "new.txt"), []byte("new"))
}

// TestHealWorkspaceDiskAfterLostWrites: on a full host a data block's writeback fails without any
// ext4 error (the file system stays writable, the page cache still shows the data): a checkpoint's
// failed sync notes it (NoteLostWrites), and the disk is then repaired like an aborted one, once
// the host has room.
func TestHealWorkspaceDiskAfterLostWrites(t *testing.T) {
	host, ws, d := workspaceOnSmallHost(t)
	filler := filepath.Join(host, "filler")
	sandboxtest.FillDisk(t, filler)
	if err := os.WriteFile(filepath.Join(ws, "data.bin"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatalf("a write into the page cache: %v", err)
	}
	root, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	serr := unix.Syncfs(int(root.Fd()))
	root.Close()
	if serr == nil {
		t.Fatal("the workspace's sync succeeded on the full host")
	}
	d.NoteLostWrites(ws)
	if !d.WorkspaceDiskFailed(ws) {
		t.Fatalf("a workspace whose sync failed (%v) is not reported failed", serr)
	}
	if healed, err := d.HealWorkspaceDisk(ws, func() { t.Error("released on the full host") }); healed || !errors.Is(err, ErrHostFull) {
		t.Fatalf("a repair on the full host: healed %v, err %v", healed, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	released := 0
	if healed, err := d.HealWorkspaceDisk(ws, func() { released++ }); !healed || err != nil || released != 1 {
		t.Fatalf("the repair once there is room: healed %v, err %v, released %d", healed, err, released)
	}
	if d.WorkspaceDiskFailed(ws) {
		t.Fatal("the repaired workspace is still reported failed")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "kept.txt")); err != nil || string(b) != "kept" {
		t.Fatalf("the file synced before: %q, %v", b, err)
	}
	writeSynced(t, filepath.Join(ws, "after.txt"), []byte("after"))
}

// hostDisk mounts a tmpfs of size at a temp dir: the host file system the images live on.
func hostDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = unmountAll(dir) })
	return dir
}

// workspaceOnSmallHost is a workspace disk (with kept.txt synced in it) whose image lives on a
// 96 MiB host file system, and its Disks, which make no spare meanwhile (the tests fill the host).
func workspaceOnSmallHost(t *testing.T) (host, ws string, d *Disks) {
	t.Helper()
	sandboxtest.Require(t, Probe)
	host = hostDisk(t, "96m")
	ws = filepath.Join(t.TempDir(), "s1")
	d, err := NewDisks(filepath.Join(host, "disks"), 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.EnsureWorkspaceDisk(ws, 0); err != nil {
		t.Fatal(err)
	}
	writeSynced(t, filepath.Join(ws, "kept.txt"), []byte("kept"))
	d.mu.Lock()
	d.closed = true // no spare is made on the full host meanwhile
	d.mu.Unlock()
	d.wg.Wait()
	return host, ws, d
}

// abortJournal makes files and directories in ws and syncs its file system (each commit takes
// journal blocks the full host has not allocated) until ext4 aborts the journal and
// failed says so. No file has data: a data block's failed write is only an error to its fsync.
func abortJournal(t *testing.T, ws string, failed func() bool) {
	t.Helper()
	root, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for i := range 500 {
		dir := filepath.Join(ws, fmt.Sprintf("d%d", i))
		if err := os.Mkdir(dir, 0o755); err == nil {
			for j := range 20 {
				if f, err := os.Create(filepath.Join(dir, fmt.Sprint(j))); err == nil {
					f.Close()
				}
			}
		}
		_ = unix.Syncfs(int(root.Fd()))
		if failed() {
			return
		}
	}
	t.Fatal("the journal did not abort after 500 synced commits on the full host")
}

func writeSynced(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err == nil {
		_, err = f.Write(b)
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestQuietJournalAbortSeen: a journal aborted by jbd2's own timed commit, with no write since
// (files written on the full host, never synced), leaves no trace ext4 counts (errors_count 0, the
// mount rw) until the next write. The check before a turn must still see it, so that the turn's
// code does not run on a workspace that will refuse its first write. Before, it was seen only by
// that write (the turn's error), and repaired a turn later.
func TestQuietJournalAbortSeen(t *testing.T) {
	host, ws, d := workspaceOnSmallHost(t)
	if out, err := exec.Command("mount", "-o", "remount,commit=1", ws).CombinedOutput(); err != nil {
		t.Fatalf("remount commit=1: %v: %s", err, out)
	}
	dev, err := blockDevOf(ws)
	if err != nil {
		t.Fatal(err)
	}
	marker := markKernelLog(t)
	filler := filepath.Join(host, "filler")
	sandboxtest.FillDisk(t, filler)
	for i := range 40 { // metadata for the timed commit: no sync here
		err := os.Mkdir(filepath.Join(ws, fmt.Sprintf("q%d", i)), 0o755)
		if errors.Is(err, syscall.EROFS) {
			// The commit already ran and aborted (its 1 s tick, or a sync of the whole host by
			// another process, came within the loop on a loaded machine): what the test waits for.
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	waitJournalAborted(t, dev, marker)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if !d.WorkspaceDiskFailed(ws) { // seen whether or not ext4 counted the abort (6.18 does not)
		t.Fatal("a journal aborted by its timed commit is not seen before the next turn")
	}
}

// markKernelLog writes a line of its own to the kernel's log and returns it: the ring buffer drops
// old lines, and loop devices (and their names in older lines) are reused.
func markKernelLog(t *testing.T) string {
	t.Helper()
	marker := fmt.Sprintf("carryover test %s %d", t.Name(), time.Now().UnixNano())
	if err := os.WriteFile("/dev/kmsg", []byte(marker+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	return marker
}

// waitJournalAborted waits for the kernel's log, after marker, to say dev's journal aborted.
func waitJournalAborted(t *testing.T, dev, marker string) {
	t.Helper()
	want := "Aborting journal on device " + dev + "-8"
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ := exec.Command("dmesg").Output()
		if _, after, ok := strings.Cut(string(out), marker); ok && strings.Contains(after, want) {
			return
		}
	}
	t.Fatalf("no %q in the kernel's log after 20 s", want)
}
