package workspace

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover"
)

// A full workspace disk (its blocks or its files: the session's sandbox.disk and
// sandbox.disk_inodes) is the request's fault: a 413 payload_too_large that says how much room is
// left (a bare 500 "internal error" before). An upload of known size that cannot fit is refused
// before anything is written; one of unknown size (chunked) is refused when the disk says ENOSPC,
// its part removed. That part's blocks come back only once ext4 commits the transaction that freed
// them, and on a disk mounted with discard once the discard is done, in the background: the room
// the error reports (and the next upload finds) may be short of the truth for a moment.

// checkRoom refuses a file of size bytes (-1: unknown, not checked) that the workspace disk has no
// room for.
func (d Dir) checkRoom(p string, size int64) error {
	if size <= 0 {
		return nil
	}
	var st unix.Statfs_t
	if unix.Statfs(string(d), &st) != nil || size <= int64(st.Bavail)*st.Bsize {
		return nil
	}
	return fullError(p, size, st)
}

// fullError is the 413 of path p (size bytes, -1: unknown) on a disk of st.
func fullError(p string, size int64, st unix.Statfs_t) error {
	free, disk := int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize
	what := fmt.Sprintf("%q", p)
	if size >= 0 {
		what = fmt.Sprintf("%q (%s)", p, bytesText(size))
	}
	e := carryover.Errorf(carryover.CodePayloadTooLarge,
		"the workspace disk is full: %s does not fit (%s free of %s, room for %d more files)",
		what, bytesText(free), bytesText(disk), st.Ffree).
		WithDetails("path", p, "free_bytes", free, "disk_bytes", disk, "free_files", st.Ffree)
	if size >= 0 {
		e = e.WithDetails("size_bytes", size)
	}
	return e
}

// writeError is err, an error writing path p of the workspace, as the API answers it: a full disk
// (above); a disk the host's I/O error left read-only says so and when it mends
// (kernel/sandbox/diskheal.go); anything else is PathError's.
func (d Dir) writeError(p string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		d.commit()
		var st unix.Statfs_t
		if unix.Statfs(string(d), &st) != nil {
			return carryover.Errorf(carryover.CodePayloadTooLarge, "the workspace disk is full: %q does not fit", p).WithDetails("path", p)
		}
		return fullError(p, -1, st)
	case errors.Is(err, syscall.EROFS):
		return carryover.Errorf(carryover.CodeInternal,
			"the workspace disk is read-only after an I/O error of the host (its disk full): the session's next run repairs it once the host has room").
			WithDetails("path", p)
	}
	return PathError(p, err)
}

// commit commits the workspace file system's journal (syncfs), so that the blocks of a refused
// upload's part are given back now rather than at ext4's next timed commit (up to 5 s). Only on
// this error path: it also writes back the disk's other dirty data.
func (d Dir) commit() {
	if f, err := os.Open(string(d)); err == nil {
		_ = unix.Syncfs(int(f.Fd()))
		f.Close()
	}
}

// bytesText is n in the largest binary unit that keeps it at least 1, one decimal ("13.9 MiB").
func bytesText(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for ; v >= 1024 && i < len(units)-1; i++ {
		v /= 1024
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
