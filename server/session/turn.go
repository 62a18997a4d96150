package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/kernels"
)

// A turn is one run or shell command. Both go through the same pipeline: beginTurn (the session's
// run lock in arrival order, then admission: state and budget), their own execution, then endTurn
// (one session write, the history entry, cost and budget accounting). A run also checkpoints
// between the two (run.go).

// turnRecord is what a finished turn leaves in the session and its history.
type turnRecord struct {
	kind       string         // "run" | "exec"
	code       string         // the code or command as given
	count      int            // the execution_count recorded
	advance    bool           // a run: the session's execution_count becomes count
	status     string         // ok | error | aborted, or the error code the turn answered
	answer     any            // the run or exec answer, recorded as JSON
	startedAt  time.Time      // zero: now minus durationMS
	durationMS float64        //
	updateData map[string]any // merged into the session's data (a run's update_data)
	cpuSeconds float64        // CPU used outside the kernel (an exec's rusage), added to the cost
}

// beginTurn takes the session's run lock and admits the turn; end releases the lock. queued, when
// not nil, is called as soon as the turn has its place in the lock's line (fifo.Lock.LockQueued).
func (ls *Session) beginTurn(ctx context.Context, queued func()) (end func(), err error) {
	return ls.beginTurnAs(ctx, queued, nil)
}

// beginTurnAs is beginTurn holding the run lock with tag (fifo.Lock.LockAs: a run's *cellTurn).
func (ls *Session) beginTurnAs(ctx context.Context, queued func(), tag any) (end func(), err error) {
	s := ls.svc
	if err := ls.lock.LockAs(ctx, queued, tag); err != nil {
		return nil, err
	}
	if err := ls.admit(ctx); err != nil {
		ls.lock.Unlock()
		return nil, err
	}
	if err := ls.healDisk(ctx); err != nil { // a workspace a full host left read-only (diskheal.go)
		ls.lock.Unlock()
		return nil, err
	}
	// Skills changed on another node (or while this one was down) are seen from this turn on. Only a
	// live kernel that mounts /skills needs it: a new kernel syncs as it attaches (attachSkills),
	// and a kernel that cannot mount them (no sandbox) never reads the folder.
	ls.mu.Lock()
	k, tenant := ls.kern, ls.doc.TenantName()
	ls.mu.Unlock()
	if _, mounts := kernelProcess(k).(kernels.SkillsAttacher); mounts {
		if err := s.skills.Sync(ctx, tenant, false); err != nil {
			s.log.Warn("skills cache not updated from the store", "session", ls.id, "err", err)
		}
	}
	// The turn's end may leave an idle kernel a queued claim can hibernate (capacity.go).
	return func() { ls.lock.Unlock(); s.adm.ledger.Poke() }, nil
}

// kernelProcess is k's process, nil without a kernel.
func kernelProcess(k *kernel.Kernel) kernel.KernelProcess {
	if k == nil {
		return nil
	}
	return k.Process()
}

// admit checks the session may run now (state, budget), starting a pending one. Caller holds ls.lock.
func (ls *Session) admit(ctx context.Context) error {
	s := ls.svc
	ls.mu.Lock()
	deleted, evicted := ls.deleted, ls.evicted
	ls.mu.Unlock()
	if evicted { // dropped from this node while the turn queued: another node serves it now
		return carryover.Errorf(carryover.CodeNotOwner, "session %q moved to another node; retry", ls.id).
			WithDetails("session_id", ls.id)
	}
	if deleted {
		return carryover.Errorf(carryover.CodeNotFound, "session %q was deleted", ls.id)
	}
	doc := ls.docCopy()
	switch {
	case doc.State == carryover.StatePaused:
		return carryover.Errorf(carryover.CodeSessionPaused, "session is paused; resume it first")
	case doc.Closed():
		return carryover.Errorf(carryover.CodeSessionClosed, "session is %s", doc.State).WithDetails("state", doc.State)
	case doc.State == carryover.StatePending:
		if _, _, err := ls.transition(ctx, carryover.StateRunning, nil); err != nil {
			return err
		}
		ls.emit(ctx, carryover.EventSessionStarted, map[string]any{"auto": true})
	}
	if err := s.adm.quota.CheckTurn(ctx, ls.tenant()); err != nil {
		return err
	}
	return ls.checkBudget(ctx)
}

// endTurn records a finished turn. What fails to be recorded is returned (and logged), never
// dropped: the turn itself happened, its answer says what did not stick.
func (ls *Session) endTurn(ctx context.Context, t turnRecord) error {
	s := ls.svc
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if err := ls.accountTurn(ctx, t); err != nil {
		errs = append(errs, fmt.Errorf("saving the session after the turn: %w", err))
	}
	if t.startedAt.IsZero() {
		t.startedAt = time.Now().UTC().Add(-time.Duration(t.durationMS * float64(time.Millisecond)))
	}
	answer, _ := json.Marshal(t.answer)
	if _, err := s.store.InsertExecution(ctx, carryover.Execution{
		SessionID: ls.id, ExecutionCount: t.count, Kind: t.kind, Code: t.code, Status: t.status,
		Result: answer, StartedAt: t.startedAt, DurationMS: t.durationMS,
	}); err != nil {
		errs = append(errs, fmt.Errorf("recording the turn in the history: %w", err))
	}
	if k := ls.currentKernel(); k != nil && t.kind == "run" {
		// A long turn is sampled at once so the next budget check sees it; short ones wait for the
		// once-a-second sampling.
		if t.durationMS > 100 {
			ls.sampleCost(ctx, k)
		} else {
			ls.sampleCostIfStale(ctx, k)
		}
	}
	if err := ls.afterTurn(ctx); err != nil {
		errs = append(errs, err)
	}
	if doc := ls.docCopy(); doc.Sandbox.Skills == carryover.SkillsReadWrite {
		if err := s.skills.Sync(ctx, doc.TenantName(), true); err != nil {
			errs = append(errs, fmt.Errorf("saving the session's changes to /skills: %w", err))
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		s.log.Error("turn not fully recorded", "session", ls.id, "kind", t.kind, "err", err)
		s.m.RecordFailures.Inc()
	}
	return err
}

// accountTurn is the turn's one session write: the iteration, the activity, the counter, the data
// and (for an exec) its CPU cost.
func (ls *Session) accountTurn(ctx context.Context, t turnRecord) error {
	s := ls.svc
	now := time.Now().UTC()
	_, err := ls.update(ctx, func(d *carryover.Session) error {
		if t.advance {
			d.ExecutionCount = t.count
		}
		d.BudgetConsumed.Iterations++
		d.LastActivity = now
		if t.updateData != nil {
			d.Data = mergedData(d.Data, t.updateData)
		}
		if t.cpuSeconds > 0 {
			s.cfg.chargeLocked(d, t.cpuSeconds, 0)
		}
		return nil
	})
	return err
}

// syncTurn makes the writes a turn made under carryover.DeferSync durable (carryover.Syncer): its
// answer leaves only after it. A failure is the answer's record_error (the checkpoint and the
// records may not survive a power cut), logged and counted.
func (ls *Session) syncTurn(ctx context.Context) error {
	s := ls.svc
	sy, ok := s.store.(carryover.Syncer)
	if !ok {
		return nil
	}
	if err := sy.Sync(context.WithoutCancel(ctx)); err != nil {
		s.log.Error("turn not flushed to disk", "session", ls.id, "err", err)
		s.m.RecordFailures.Inc()
		return fmt.Errorf("the turn's checkpoint and records were committed but not flushed to disk: %w", err)
	}
	return nil
}

// syncFailed is syncTurn for a turn that ends in err before its cell ran: what it wrote meanwhile
// (a kernel's claim that failed: its statuses and events) is made durable before err returns.
func (ls *Session) syncFailed(ctx context.Context, err error) error {
	_ = ls.syncTurn(ctx) // logged and counted there; err is the turn's answer
	return err
}
