package workspace

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover"
)

// writeError is err, an error writing path p of the workspace, as the API answers it. A full
// workspace disk (its blocks or its files: the session's sandbox.disk and sandbox.disk_inodes) is
// the request's fault, a payload_too_large that says how much room is left; a disk the host's I/O
// error left read-only says so and when it mends (kernel/sandbox/diskheal.go). Both were a bare
// 500 "internal error" before. Anything else is PathError's.
func (d Dir) writeError(p string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		e := carryover.Errorf(carryover.CodePayloadTooLarge, "the workspace disk is full: %q does not fit", p).WithDetails("path", p)
		d.commit()
		var st unix.Statfs_t
		if unix.Statfs(string(d), &st) == nil {
			free, size := int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize
			e = carryover.Errorf(carryover.CodePayloadTooLarge,
				"the workspace disk is full: %q does not fit (%s free of %s, room for %d more files)",
				p, bytesText(free), bytesText(size), st.Ffree).
				WithDetails("path", p, "free_bytes", free, "disk_bytes", size, "free_files", st.Ffree)
		}
		return e
	case errors.Is(err, syscall.EROFS):
		return carryover.Errorf(carryover.CodeInternal,
			"the workspace disk is read-only after an I/O error of the host (its disk full): the session's next run repairs it once the host has room").
			WithDetails("path", p)
	}
	return PathError(p, err)
}

// commit commits the workspace file system's journal (syncfs). ext4 gives the blocks of a removed
// file back only when the transaction that freed them commits (up to 5 s later): until then the
// room a refused upload's part took stays used, and the next upload, one that fits, was refused
// too. Only on this error path: it also writes back the disk's other dirty data.
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
