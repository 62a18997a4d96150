package kernels

// diskheal.go: a workspace whose file system lost writes to an I/O error of the host (a full disk
// under its sparse image fails the image's writes: an aborted ext4 journal leaves it read-only, a
// failed data writeback fails the checkpoint's sync; kernel/sandbox/diskheal.go) is repaired at the
// start of the session's next turn once the host has room. The kernel is ended first (its box holds
// the file system too), the disk is checked and mounted again, and the turn's new kernel restores
// the last checkpoint, whose report in the answer (restore, files_ahead) names what differs. While
// the host is still full nothing changes: the turn runs on the workspace as it is and its
// checkpoint_error says why.

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
)

// diskFailed is what the answers and events say happened to such a workspace.
const diskFailed = "the workspace's file system lost writes to an I/O error of the host (its disk holding the workspace images full, say)"

// DiskRepaired is the reason given for the kernel a repair ends.
const DiskRepaired = diskFailed + ": repaired, the session restored from its last checkpoint"

// HealDisk repairs session id's workspace disk before a turn when it needs it, calling release
// first to end the session's kernel. A repair that failed is the turn's error; a host still full
// is logged and changes nothing.
func (f *Factory) HealDisk(id string, release func()) error {
	h := f.Healer()
	if h == nil {
		return nil
	}
	healed, err := h.HealWorkspaceDisk(f.workspace(id), release)
	switch {
	case errors.Is(err, syscall.ENOSPC):
		f.log.Warn("workspace disk not repaired yet: the host is still full", "session", id, "err", err)
	case err != nil:
		f.log.Error("workspace disk not repaired", "session", id, "err", err)
		return &carryover.Error{Code: carryover.CodeInternal, Err: err, Message: diskFailed +
			" and could not be repaired yet (the next turn tries again): " + err.Error()}
	case healed:
		f.log.Warn("workspace disk repaired after a host I/O error", "session", id)
	}
	return nil
}

// DiskNote adds to session id's failed checkpoint error why, when the workspace's file system
// failed after a host I/O error (read-only, or its sync failed), and when it comes back.
func (f *Factory) DiskNote(id string, err error) error {
	h := f.Healer()
	if h == nil {
		return err
	}
	ws := f.workspace(id)
	if se := (*persistence.SyncError)(nil); errors.As(err, &se) {
		h.NoteLostWrites(ws)
	}
	if h.WorkspaceDiskFailed(ws) {
		return fmt.Errorf("%w (%s: it is repaired at the session's first turn once the host has room, "+
			"the session then restored from its last checkpoint)", err, diskFailed)
	}
	return err
}
