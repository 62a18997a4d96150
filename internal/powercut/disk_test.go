package powercut

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover/internal/sandboxtest"
)

// needDisk skips where a Disk cannot be made, and fails instead under make test's
// CARRYOVER_TEST_SANDBOX_REQUIRED (the same machines run the sandbox suites as root).
func needDisk(t *testing.T) {
	t.Helper()
	if why := Available(); why != "" {
		sandboxtest.Missing(t, why)
	}
}

// TestCutLosesWhatWasNotFlushed shows the disk loses what a power cut loses and keeps what was
// fsynced: over several cuts, a file written and fsynced (with its directory) is there with its
// bytes; a file written without fsync is gone or short; ext4's own check finds the image clean
// once the journal is replayed.
func TestCutLosesWhatWasNotFlushed(t *testing.T) {
	needDisk(t)
	t.Parallel()
	work := t.TempDir()
	d, err := New(work, 64<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.Trace = t.Logf
	for round := range 5 {
		synced := bytes.Repeat([]byte{byte('a' + round)}, 100_000)
		write := func(name string, data []byte, sync bool) {
			f, err := os.Create(filepath.Join(d.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
			if sync {
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
		}
		write("synced.tmp", synced, true)
		if err := os.Rename(filepath.Join(d.Dir, "synced.tmp"), filepath.Join(d.Dir, "synced")); err != nil {
			t.Fatal(err)
		}
		dir, _ := os.Open(d.Dir)
		if err := dir.Sync(); err != nil {
			t.Fatal(err)
		}
		dir.Close()
		write("unsynced", bytes.Repeat([]byte{'u'}, 100_000), false)
		if _, err := d.Cut(); err != nil {
			t.Fatal(err)
		}
		if err := d.Unmount(); err != nil {
			t.Fatal(err)
		}
		checkAfterRecovery(t, d, round)
		got, err := os.ReadFile(filepath.Join(d.Dir, "synced"))
		if err != nil || !bytes.Equal(got, synced) {
			t.Fatalf("round %d: the fsynced file: %d bytes, err %v; want %d bytes of %q", round, len(got), err, len(synced), synced[0])
		}
		if got, err := os.ReadFile(filepath.Join(d.Dir, "unsynced")); err == nil && len(got) == 100_000 {
			t.Fatalf("round %d: the file never fsynced survived whole: the cut dropped nothing", round)
		}
		os.Remove(filepath.Join(d.Dir, "unsynced"))
	}
}

// checkAfterRecovery mounts the cut image (the kernel replays ext4's journal, as a machine does
// when the power comes back), unmounts it cleanly and runs e2fsck on it, which must find nothing;
// then mounts it again for the test to read. The image as the cut left it is not checked: before
// the replay its home blocks may hold part of a checkpoint (a bitmap written, the inode table not
// yet), which is how ext4 works, not damage; e2fsck -n cannot replay, so it would report them.
func checkAfterRecovery(t *testing.T, d *Disk, round int) {
	t.Helper()
	if err := d.Mount(); err != nil {
		t.Fatalf("round %d: mount after the cut: %v", round, err)
	}
	if err := d.Unmount(); err != nil {
		t.Fatalf("round %d: clean unmount after the replay: %v", round, err)
	}
	if out, err := exec.Command("e2fsck", "-fn", filepath.Join(d.work, "durable.img")).CombinedOutput(); err != nil {
		t.Fatalf("round %d: e2fsck after the journal's replay: %v\n%s", round, err, out)
	}
	if err := d.Mount(); err != nil {
		t.Fatal(err)
	}
}

// TestAHeldDeviceAfterACutDoesNotStopTheDisk holds the loop device open (as a process outside the
// test's control might) across a cut and an unmount: the device cannot be detached, so its FUSE
// mount stays busy. After a cut that is no harm (the device is frozen): the disk is mounted again on
// a fresh device with what was fsynced, and what the held device is asked to write later never
// reaches the image. Without a cut, a held device is an error, named with its holder.
func TestAHeldDeviceAfterACutDoesNotStopTheDisk(t *testing.T) {
	needDisk(t)
	t.Parallel()
	work := t.TempDir()
	d, err := New(work, 64<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.Trace = t.Logf
	d.HoldWait = 300 * time.Millisecond
	if err := os.WriteFile(filepath.Join(d.Dir, "kept"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// syncfs of this disk only: a sync of the whole host would also commit the journals of other
	// tests' disks at a moment they do not choose (two tests raced with such syncs).
	dir, err := os.Open(d.Dir)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Syncfs(int(dir.Fd()))
	dir.Close()
	if err != nil {
		t.Fatal(err)
	}
	held, err := os.OpenFile(d.loop, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := d.Cut(); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmount(); err != nil {
		t.Fatalf("unmount after a cut with the device held: %v", err)
	}
	// The held device takes a write of the image's first block (the old filesystem's would land
	// anywhere): it must not reach the image.
	if _, err := held.WriteAt(bytes.Repeat([]byte{0xff}, 4096), 0); err == nil {
		held.Sync()
	}
	if err := d.Mount(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(d.Dir, "kept")); err != nil || string(got) != "kept" {
		t.Fatalf("after the remount: %q, %v", got, err)
	}
	// Without a cut the held device could still write to the image: Unmount says so and by whom.
	again, err := os.OpenFile(d.loop, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Unmount()
	again.Close()
	if err == nil || !strings.Contains(err.Error(), "has it open") {
		t.Fatalf("unmount without a cut, the device held: %v; want an error naming the holder", err)
	}
}
