package session

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// saved.go: whether the session's last checkpoint still holds everything its kernel holds, so a
// handover (handover.go) can give the session up without taking another one. The signal is exact or
// it is not given: the turn's checkpoint rode on the cell's own execute_request, the agent found
// nothing of the session able to run without a message (no thread, task or timer of its own:
// quiet), no message reached the kernel after that request (kernel.Inputs: comms, the variable
// inspector, a Jupyter client, an interrupt all count), no process of the session runs in its box,
// and the workspace is what that checkpoint saved. Anything else checkpoints as before.

// savedMark is the session's last checkpoint that rode on a cell of kernel k and found it quiet;
// input is the kernel's input count with that cell's request (0: none, or not exact).
type savedMark struct {
	k          *kernel.Kernel
	input      uint64
	checkpoint string
}

// markSaved records the turn's checkpoint cp, taken on the cell whose request had input count
// input on kernel k; a checkpoint that was not quiet, or not exact, clears the mark.
func (ls *Session) markSaved(k *kernel.Kernel, input uint64, cp *carryover.CheckpointResult) {
	m := savedMark{}
	if cp != nil && cp.Quiet && input != 0 {
		m = savedMark{k: k, input: input, checkpoint: cp.ID}
	}
	ls.mu.Lock()
	ls.saved = m
	ls.mu.Unlock()
}

// savedAsIs reports whether the session's last checkpoint holds all that kernel k holds now (see
// the top of this file); false whenever that cannot be told for sure.
func (ls *Session) savedAsIs(ctx context.Context, k *kernel.Kernel) bool {
	ls.mu.Lock()
	m := ls.saved
	last := ls.doc.LastCheckpoint
	ls.mu.Unlock()
	if m.k != k || m.input == 0 || k.Inputs() != m.input || last == nil || last.ID != m.checkpoint {
		return false
	}
	if bg := k.Background(); bg == nil || len(bg) > 0 {
		return false // a process of the session runs, or its provisioner cannot tell
	}
	same, err := ls.svc.ckpt.WorkspaceMatches(ctx, ls.id, m.checkpoint, ls.svc.cfg.workspace(ls.id))
	return err == nil && same
}
