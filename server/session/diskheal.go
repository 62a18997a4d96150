package session

// diskheal.go: a workspace whose file system lost writes to an I/O error of the host (a full disk
// under its sparse image fails the image's writes: an aborted ext4 journal leaves it read-only, a
// failed data writeback fails the checkpoint's sync; kernel/sandbox/diskheal.go) is repaired at the
// start of the session's next turn once the host has room. The kernel is ended first (its box holds
// the file system too), the disk is checked and mounted again, and the turn's new kernel restores
// the last checkpoint, whose report in the answer (restore, files_ahead) names what differs. While
// the host is still full nothing changes: the turn runs on the workspace as it is and its
// checkpoint_error says why.

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
)

// diskFailed is what the answers and events say happened to such a workspace.
const diskFailed = "the workspace's file system lost writes to an I/O error of the host (its disk holding the workspace images full, say)"

// healDisk repairs the session's workspace disk before a turn when it needs it. The caller holds
// ls.lock.
func (ls *Session) healDisk(ctx context.Context) error {
	s := ls.svc
	h := s.kern.Healer()
	if h == nil {
		return nil
	}
	healed, err := h.HealWorkspaceDisk(s.cfg.workspace(ls.id), func() {
		ls.releaseKernel(ctx, diskFailed+": repaired, the session restored from its last checkpoint")
	})
	switch {
	case errors.Is(err, syscall.ENOSPC):
		s.log.Warn("workspace disk not repaired yet: the host is still full", "session", ls.id, "err", err)
	case err != nil:
		s.log.Error("workspace disk not repaired", "session", ls.id, "err", err)
		return &carryover.Error{Code: carryover.CodeInternal, Err: err, Message: diskFailed +
			" and could not be repaired yet (the next turn tries again): " + err.Error()}
	case healed:
		s.log.Warn("workspace disk repaired after a host I/O error", "session", ls.id)
	}
	return nil
}

// diskNote adds to a failed checkpoint's error why, when the workspace's file system failed after
// a host I/O error (read-only, or its sync failed), and when it comes back.
func (ls *Session) diskNote(err error) error {
	s := ls.svc
	h := s.kern.Healer()
	if h == nil {
		return err
	}
	ws := s.cfg.workspace(ls.id)
	if se := (*persistence.SyncError)(nil); errors.As(err, &se) {
		h.NoteLostWrites(ws)
	}
	if h.WorkspaceDiskFailed(ws) {
		return fmt.Errorf("%w (%s: it is repaired at the session's first turn once the host has room, "+
			"the session then restored from its last checkpoint)", err, diskFailed)
	}
	return err
}
