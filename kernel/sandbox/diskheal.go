package sandbox

// diskheal.go repairs a workspace disk that an I/O error of the host made read-only. The images are
// sparse, so a write inside one may need a new block of the host's file system: when the host is
// full the loop device fails that write. A failed data write is an error to its writer (ENOSPC at
// its fsync), but a failed write of ext4's journal (whose blocks lazy_journal_init leaves
// unallocated) or of its metadata aborts the journal, and ext4 then keeps the file system read-only
// for as long as it is mounted, long after the host has room again: the chaos harness's full-disk
// fault left every later checkpoint of such a session failing ("sync: read-only file system").
//
// The aborted superblock is shared by every mount of the image (the host's, and the clone in the
// kernel's box and its mount namespace), so it can only be mended once all of them are gone: the
// caller ends the session's kernel (release), then the image is unmounted, checked with e2fsck
// (which replays what the journal committed and fixes the counts the abort left) and mounted again.
// What was synced before the abort is kept; a write whose fsync failed may be gone.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrHostFull: the host's file system holding the images has too little room to repair a disk;
// nothing was changed. It wraps ENOSPC, which callers outside the package test for.
var ErrHostFull = fmt.Errorf("the host's disk holding the workspace images is full: %w", unix.ENOSPC)

// repairRoom is the free space the images' file system must have before a repair starts: e2fsck
// replays the journal (up to 64 MiB for a 10 GiB image) and the mount writes the superblock, each
// of them a write the full host would fail again.
const repairRoom = 64 << 20

// releaseWait bounds how long a repair waits for the last mount of an image to go (the kernel's
// box being torn down) before it gives up, leaving the workspace unmounted until the next try.
const releaseWait = 10 * time.Second

// WorkspaceDiskFailed says whether ws's file system needs a repair: mounted by d and made read-only
// by an error (an aborted journal) or noted to have lost writes (NoteLostWrites), or unmounted by a
// repair that has not finished. Cheap: one stat, one sysfs read and one attribute set (journalRefuses);
// the mount table is read only once ext4 has counted an error or refused the attribute.
func (d *Disks) WorkspaceDiskFailed(ws string) bool {
	d.mu.Lock()
	mounted, unhealed, lost := d.mounted[ws], d.unhealed[ws], d.lostWrites[ws]
	d.mu.Unlock()
	if unhealed || (mounted && lost) {
		return true
	}
	if !mounted {
		return false
	}
	return (hasErrors(ws) || journalRefuses(ws)) && readOnly(ws)
}

// probeXattr is the attribute journalRefuses sets on a workspace's root: trusted.*, which only the
// host's root reads or writes, so nothing in the box sees it (only the root's ctime moves).
const probeXattr = "trusted.carryover.probe"

// journalRefuses says whether ws's file system refuses to start a journal handle: a journal that
// jbd2's timed commit aborted (a full host failed its write) with no write since leaves ext4 with
// no error counted and the mount rw until the next write, which would be the turn's own. Setting
// an attribute is such a write (one syscall, the inode's change joins the next commit): refused,
// ext4 records the error and the mount turns read-only, as after any other failed write.
func journalRefuses(ws string) bool {
	return errors.Is(unix.Setxattr(ws, probeXattr, []byte{1}, 0), unix.EROFS)
}

// hasErrors says whether ext4 counted an error on the file system mounted at path
// (/sys/fs/ext4/<dev>/errors_count).
func hasErrors(path string) bool {
	dev, err := blockDevOf(path)
	if err != nil {
		return false
	}
	b, err := os.ReadFile("/sys/fs/ext4/" + dev + "/errors_count")
	if err != nil {
		return false
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n > 0
}

// NoteLostWrites takes a failed sync of ws's file system (a checkpoint's): writes of its image
// failed on the host (a full host fails a data block's writeback with no ext4 error counted), and
// the page cache still shows what the disk lacks, so later checkpoints would save files that are not
// on it. The disk is then repaired as a failed one (WorkspaceDiskFailed) and the session restored
// from its last checkpoint taken before the loss.
func (d *Disks) NoteLostWrites(ws string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mounted[ws] {
		d.lostWrites[ws] = true
	}
}

// blockDevOf is the name of the block device (loop3) whose file system holds path.
func blockDevOf(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", err
	}
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return "", err
	}
	return filepath.Base(link), nil
}

// readOnly says whether the file system mounted at ws is read-only: ST_RDONLY, or (Linux >= 6.x,
// where an ext4 error leaves the superblock's flags alone) "emergency_ro" or "ro" among its
// superblock's options.
func readOnly(ws string) bool {
	var sf unix.Statfs_t
	if err := unix.Statfs(ws, &sf); err == nil && sf.Flags&unix.ST_RDONLY != 0 {
		return true
	}
	point, err := filepath.Abs(ws) // the mount table's points are absolute, data_dir may not be
	if err == nil {
		point, err = filepath.EvalSymlinks(point)
	}
	if err != nil {
		return false
	}
	ms, err := readMountInfo()
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.point == point && (slices.Contains(m.opts, "emergency_ro") || slices.Contains(m.opts, "ro")) {
			return true
		}
	}
	return false
}

// HealWorkspaceDisk repairs ws's file system when WorkspaceDiskFailed says it needs it (healed:
// whether it did). release is called first and must end every process that holds the workspace
// (the session's kernel and its box). Without repairRoom free on the host it changes nothing and
// returns an error wrapping ErrHostFull. A repair that cannot finish (the image still in use, an
// e2fsck that cannot fix it) leaves the workspace unmounted, reported by WorkspaceDiskFailed, and
// is tried again by the next call; the image is never mounted twice.
func (d *Disks) HealWorkspaceDisk(ws string, release func()) (healed bool, err error) {
	if !d.WorkspaceDiskFailed(ws) {
		return false, nil
	}
	if free, err := freeBytes(d.dir); err != nil {
		return false, err
	} else if free < repairRoom {
		return false, fmt.Errorf("sandbox: workspace %s failed after an I/O error and cannot be repaired yet (%d bytes free): %w",
			ws, free, ErrHostFull)
	}
	release()
	img := d.image(ws)
	d.mu.Lock()
	d.unhealed[ws] = true
	delete(d.mounted, ws)
	err = unmountAll(ws)
	d.mu.Unlock()
	if err == nil {
		err = waitReleased(img, releaseWait)
	}
	if err == nil {
		err = checkImage(img)
	}
	if err == nil {
		d.mu.Lock()
		delete(d.unhealed, ws)
		delete(d.lostWrites, ws)
		d.mu.Unlock()
		err = d.EnsureWorkspaceDisk(ws, 0)
	}
	if err != nil {
		return false, fmt.Errorf("sandbox: repairing the workspace disk of %s: %w", ws, err)
	}
	return true, nil
}

// freeBytes is the room left to an unprivileged writer on dir's file system.
func freeBytes(dir string) (int64, error) {
	var sf unix.Statfs_t
	if err := unix.Statfs(dir, &sf); err != nil {
		return 0, err
	}
	return int64(sf.Bavail) * sf.Bsize, nil
}

// waitReleased waits until no loop device is backed by img (its last mount gone, the device
// detached by autoclear).
func waitReleased(img string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		dev := loopOf(img)
		if dev == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("image %s is still in use (%s) after %s", img, dev, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loopOf is the loop device backed by img ("" for none).
func loopOf(img string) string {
	abs, err := filepath.Abs(img)
	if err != nil {
		return ""
	}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == abs {
			return filepath.Base(filepath.Dir(filepath.Dir(f)))
		}
	}
	return ""
}

// checkImage runs e2fsck -fy on img: 0 (clean) and 1 (errors fixed) are fine; more is not.
func checkImage(img string) error {
	out, err := exec.Command("e2fsck", "-fy", img).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("e2fsck -fy %s: %w: %s", img, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// imageHasErrors says whether img's superblock records errors (ext4's ERROR_FS state or an error
// count): a server that stopped before it repaired such a disk checks it before mounting it.
func imageHasErrors(img string) bool {
	f, err := os.Open(img)
	if err != nil {
		return false
	}
	defer f.Close()
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, 1024); err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	if binary.LittleEndian.Uint16(sb[0x38:]) != 0xEF53 {
		return false
	}
	return binary.LittleEndian.Uint16(sb[0x3A:])&0x2 != 0 || binary.LittleEndian.Uint32(sb[0x194:]) != 0
}
