package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/cost"
	"github.com/carryover/carryover/server/session/kernels"
)

// hostPath maps a sandbox path (/workspace/...) or a relative one to the host workspace directory.
func (c Config) hostPath(id, p string) string { return kernels.HostPath(c.workspace(id), p) }

// ensureKernel returns the session's live kernel, claiming one from the warm pool and restoring
// the session's last checkpoint into it when it has none (first run, after a death, a hibernation
// or a server restart). The caller holds ls.lock.
func (ls *Session) ensureKernel(ctx context.Context) (*kernel.Kernel, error) {
	return ls.ensureKernelWith(ctx, ensureOpts{})
}

// ensureOpts say what the caller of ensureKernelWith does with the kernel.
type ensureOpts struct {
	// firstCell: the caller sends a cell next, so a brand-new session's set-up is left pending, to
	// ride on that cell (pendingSetup), instead of costing a round trip of its own. Any other caller
	// finds a set-up still pending sent first.
	firstCell bool
	runEnv    map[string]string // the cell's per-run env, which a claim must know of too (kernels.Factory.Claim)
	replaces  *kernel.Kernel    // the kernel a rotation replaces (kernelClaim.replaces)
}

// ensureKernelWith is ensureKernel with the caller's options.
func (ls *Session) ensureKernelWith(ctx context.Context, o ensureOpts) (*kernel.Kernel, error) {
	s := ls.svc
	ls.mu.Lock()
	k, deleted := ls.kern, ls.deleted
	ls.mu.Unlock()
	if deleted {
		return nil, carryover.Errorf(carryover.CodeNotFound, "session %q was deleted", ls.id)
	}
	if k != nil {
		select {
		case <-k.Dead():
			ls.dropDeadKernel(ctx, k)
		default:
			if !o.firstCell {
				return k, ls.flushSetup(ctx, k)
			}
			return k, nil
		}
	}
	nk := newKernel{start: time.Now()}
	k, err := ls.takeKernelFor(ctx, o)
	if err != nil {
		return nil, err
	}
	nk.k, nk.baseline = k, cost.Baseline(k)
	if err := ls.startSession(ctx, &nk, o.firstCell); err != nil {
		s.stopKernel(ctx, k)
		ls.notStarting(ctx)
		return nil, err
	}
	nk.baseline.Settle() // the claim's CPU read before the first cell (cost.Meter.Settle)
	ls.attachNew(ctx, nk)
	return k, nil
}

// newKernel is a kernel being given to a session.
type newKernel struct {
	k        *kernel.Kernel
	start    time.Time                // when the claim began
	baseline cost.Meter               // its CPU and memory when claimed (cost.Baseline)
	setup    *pendingSetup            // a brand-new session's set-up, to ride on its first cell
	restored *carryover.RestoreResult // the last checkpoint restored into it
}

// takeKernelFor claims a kernel for the session (takeKernel: its tenant's limit, then a node slot,
// which on a full node hibernates an idle session or queues), the session saying it is starting
// once the lease is held.
func (ls *Session) takeKernelFor(ctx context.Context, o ensureOpts) (*kernel.Kernel, error) {
	s := ls.svc
	starting := false
	k, err := s.takeKernel(ctx, kernelClaim{doc: ls.docCopy(), runEnv: o.runEnv, replaces: o.replaces, leased: func() error {
		starting = true
		return ls.setSandboxStatus(ctx, carryover.SandboxStarting)
	}})
	if err != nil && starting {
		ls.notStarting(ctx)
	}
	return k, err
}

// notStarting says the session's kernel is no longer starting, after a claim or start that failed.
// It is written on a context of its own (bounded): the claim often failed because its caller went
// away, and the cancelled context's write failed too, leaving the session "starting" with nothing
// starting, in memory and in the store, until its next claim.
func (ls *Session) notStarting(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusResetTimeout)
	defer cancel()
	ls.logSaveErr("sandbox status", ls.setSandboxStatus(ctx, carryover.SandboxNone))
}

// statusResetTimeout bounds notStarting's write: a store that cannot take it in this long logs it.
const statusResetTimeout = 10 * time.Second

// startSession gives a new kernel the session: its workspace (a missing one gets the checkpoint's
// files first), its set-up (left pending for a brand-new session's first cell), and its last
// checkpoint restored. On an error the caller stops the kernel and says it is not starting.
func (ls *Session) startSession(ctx context.Context, nk *newKernel, firstCell bool) error {
	s := ls.svc
	doc := ls.docCopy()
	if err := ls.ensureWorkspace(ctx); err != nil {
		return err
	}
	var err error
	if firstCell && doc.LastCheckpoint == nil && doc.ExecutionCount == 0 {
		nk.setup, err = ls.deferSetup(ctx, nk.k, doc)
	} else {
		err = s.kern.Prepare(ctx, ls.id, nk.k, doc)
	}
	if err != nil {
		return fmt.Errorf("preparing kernel: %w", err)
	}
	if doc.LastCheckpoint == nil {
		return nil
	}
	nk.restored, err = s.ckpt.RestoreIntoNew(ctx, nk.k, ls.id, s.cfg.workspace(ls.id)) // no user code ran in it yet
	if err != nil {
		// Nothing is lost: the checkpoint stays in the database and the next run tries again.
		return (&carryover.Error{Code: carryover.CodeInternal, Err: err, Message: fmt.Sprintf(
			"the session's last checkpoint %s could not be restored into a new kernel (it is kept; the next run tries again): %v",
			doc.LastCheckpoint.ID, err)}).WithDetails("checkpoint_id", doc.LastCheckpoint.ID)
	}
	return nil
}

// attachNew makes k the session's live kernel, saved and told to subscribers, and starts watching
// it (its death, its comms).
func (ls *Session) attachNew(ctx context.Context, nk newKernel) {
	k := nk.k
	now := time.Now().UTC()
	ls.relayComms(k) // comm_relay.go: the widgets' messages, subscribed before anyone can send a cell
	ls.mu.Lock()
	ls.attachLocked(k, nk.baseline)
	ls.setup = nk.setup
	ls.doc.Sandbox.ID = "sbx_" + k.ID()
	ls.doc.Sandbox.Status = carryover.SandboxLive
	ls.doc.Sandbox.StartedAt = &now
	err := ls.saveLocked(ctx)
	ls.mu.Unlock()
	ls.logSaveErr("live sandbox", err)
	ls.emit(ctx, carryover.EventSandboxCreated, map[string]any{"sandbox_id": "sbx_" + k.ID(), "pid": k.PID(),
		"duration_ms": ms(time.Since(nk.start))})
	if nk.restored != nil {
		ls.emit(ctx, carryover.EventCheckpointRestored, nk.restored)
		ls.notes.Restored(nk.restored)
	}
	go ls.watchKernel(k)
}

// ensureWorkspace makes the session's workspace dir. When it does not exist and the session has a
// checkpoint (a fork before its first use, or a data dir whose workspaces were lost), the files of
// its latest checkpoint come back into it first, so the first run, exec or file request finds them.
func (ls *Session) ensureWorkspace(ctx context.Context) error {
	s := ls.svc
	ls.workspaceMu.Lock()
	defer ls.workspaceMu.Unlock()
	ws := s.cfg.workspace(ls.id)
	if err := s.kern.CheckDiskless(ls.id); err != nil {
		return err
	}
	if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
		if err == nil {
			s.kern.MountDisk(ls.id, ws, kernels.DiskSize(ls.docCopy().Sandbox.Disk)) // after a restart: the image is there, its mount is not
		}
		return err
	}
	if ls.docCopy().LastCheckpoint != nil {
		materialize := s.ckpt.MaterializeWorkspace
		if s.kern.Disks() != nil {
			materialize = func(ctx context.Context, id, ws string) (int, error) {
				return s.kern.MaterializeOnDisk(ctx, id, ws, kernels.DiskSize(ls.docCopy().Sandbox.Disk))
			}
		}
		n, err := materialize(ctx, ls.id, ws)
		switch {
		case err == nil:
			s.log.Info("workspace restored from checkpoint", "session", ls.id, "files", n)
			return nil
		case !errors.Is(err, carryover.ErrNotFound):
			return &carryover.Error{Code: carryover.CodeInternal, Err: err, Message: fmt.Sprintf(
				"the session's workspace could not be restored from its last checkpoint: %v", err)}
		}
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	s.kern.MountDisk(ls.id, ws, kernels.DiskSize(ls.docCopy().Sandbox.Disk))
	return nil
}

// watchKernel notices a kernel's death between runs, records it and restores the session eagerly.
func (ls *Session) watchKernel(k *kernel.Kernel) {
	s := ls.svc
	<-k.Dead()
	ls.mu.Lock()
	current := ls.kern == k
	ls.mu.Unlock()
	if !current {
		return // shut down on purpose
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return
	}
	ctx := context.Background()
	if err := ls.lock.Lock(ctx); err != nil {
		return
	}
	defer ls.lock.Unlock()
	ls.mu.Lock()
	current = ls.kern == k
	ls.mu.Unlock()
	if !current {
		return // the run that saw the death dealt with it
	}
	ls.dropDeadKernel(ctx, k)
	if st := ls.docCopy().State; st == carryover.StateRunning {
		if _, err := ls.ensureKernel(ctx); err != nil {
			s.log.Error("restore after kernel death failed", "session", ls.id, "err", err)
		}
	}
}

// dropDeadKernel forgets a dead kernel and records the death. The caller holds ls.lock.
func (ls *Session) dropDeadKernel(ctx context.Context, k *kernel.Kernel) {
	s := ls.svc
	ls.mu.Lock()
	if ls.kern != k {
		ls.mu.Unlock()
		return
	}
	ls.kern = nil
	ls.doc.Sandbox.Status = carryover.SandboxNone
	err := ls.saveLocked(ctx)
	ls.mu.Unlock()
	ls.logSaveErr("kernel death", err)
	s.m.KernelDeaths.Inc()
	reason := ""
	if err := k.Err(); err != nil {
		reason = err.Error()
	}
	payload := map[string]any{"sandbox_id": "sbx_" + k.ID(), "reason": reason}
	ls.noteEnded(k, ls.notes.EndedByDeath(k), payload)
	ls.emit(ctx, carryover.EventKernelDied, payload)
	s.stopKernel(ctx, k)
}

// releaseKernel stops the session's kernel on purpose (stop, cancel, hibernate, rotate).
func (ls *Session) releaseKernel(ctx context.Context, reason string) {
	s := ls.svc
	if k := ls.currentKernel(); k != nil {
		// The kernel's last use (a hibernation's checkpoint, the last second of a turn) is the
		// session's: sampled before the kernel and its figures are gone.
		ls.sampleCost(ctx, k)
	}
	ls.mu.Lock()
	k := ls.kern
	ls.kern = nil
	ls.mu.Unlock()
	if k == nil {
		return
	}
	payload := map[string]any{"sandbox_id": "sbx_" + k.ID(), "reason": reason}
	ls.noteEnded(k, k.Background(), payload)
	s.stopKernel(ctx, k)
	ls.emit(ctx, carryover.EventSandboxTerminated, payload)
}

// checkpoint saves the session now. The caller holds ls.lock.
func (ls *Session) checkpoint(ctx context.Context, k *kernel.Kernel) (*carryover.CheckpointResult, error) {
	return ls.checkpointWith(ctx, k, ls.docCopy().ExecutionCount, nil, "", false)
}

// checkpointWith commits a checkpoint whose snapshot may already have been taken on the turn's own
// execute_request (prep and its answer); otherwise the agent is asked now. The session then points
// at it (last_checkpoint): saved at once, or, with byTurn, in memory only, for the turn's own
// session write (endTurn's accountTurn, which always follows) to save: one document write a turn,
// not two, and the pointer and the turn's counter stored together.
func (ls *Session) checkpointWith(ctx context.Context, k *kernel.Kernel, turn int, prep *persistence.Prepared, answer string, byTurn bool) (*carryover.CheckpointResult, error) {
	s := ls.svc
	start := time.Now()
	var err error
	if prep == nil {
		// A set-up still pending (its cell never reached the kernel) goes first: the snapshot
		// records the kernel's cwd and env.
		if err := ls.flushSetup(ctx, k); err != nil {
			return nil, err
		}
		if prep, err = s.ckpt.Prepare(ctx, ls.id); err != nil {
			return nil, err
		}
		answer = ""
	}
	// A snapshot the kernel aborted (kernel/aborted.go) is taken again, not lost.
	res, err := s.ckpt.Finish(ctx, kernel.RetryAborted{Kernel: k, Interrupted: persistence.ErrInterrupted}, prep, turn, s.cfg.workspace(ls.id), answer)
	s.m.CheckpointSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, err
	}
	if res.PruneError != nil {
		s.log.Warn("older checkpoints not pruned; a later checkpoint prunes them", "session", ls.id, "err", res.PruneError)
	}
	s.m.CheckpointBytes.Add(float64(res.BytesWritten))
	ref := &carryover.CheckpointRef{ID: res.ID, Turn: res.Turn, CreatedAt: time.Now().UTC()}
	if byTurn {
		ls.mu.Lock()
		ls.doc.LastCheckpoint = ref
		ls.mu.Unlock()
	} else if _, err := ls.update(ctx, func(d *carryover.Session) error { d.LastCheckpoint = ref; return nil }); err != nil {
		// The checkpoint is committed; a restore after a restart would still find it only through
		// the store, so say so instead of claiming the session points at it.
		return res, fmt.Errorf("checkpoint %s is saved, but the session could not be updated to point at it: %w", res.ID, err)
	}
	// Every answer reports what was skipped; the event log says so when that list changes, so a
	// generator kept for twenty turns is one event, not twenty.
	key := skippedKey(res)
	ls.mu.Lock()
	changed := key != ls.lastSkipped
	ls.lastSkipped = key
	ls.mu.Unlock()
	if changed && key != "" {
		ls.emit(ctx, carryover.EventVariablesSkipped, map[string]any{"checkpoint_id": res.ID,
			"skipped": res.Skipped, "files_skipped": res.FilesSkipped})
	}
	return res, nil
}

// skippedKey identifies the set of skipped names and paths with their reasons.
func skippedKey(res *carryover.CheckpointResult) string {
	var b strings.Builder
	for _, v := range res.Skipped {
		fmt.Fprintf(&b, "v:%s:%s:%s\n", v.Name, v.Type, v.Reason)
	}
	for _, f := range res.FilesSkipped {
		fmt.Fprintf(&b, "f:%s:%s\n", f.Path, f.Reason)
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// attachLocked makes k the session's kernel and restarts its rotation clock and its cost meter at m
// (cost.Baseline). Caller holds ls.mu.
func (ls *Session) attachLocked(k *kernel.Kernel, m cost.Meter) {
	ls.kern = k
	ls.setup = nil
	ls.kernStart = time.Now()
	ls.pausedFor = 0
	if !ls.pausedAt.IsZero() {
		ls.pausedAt = time.Now()
	}
	ls.cost = m
}

// sandboxEvent logs a limit hit and records it as a sandbox_limit_exceeded event of the session.
func (s *Service) sandboxEvent(id string, k *kernel.Kernel, hit kernel.LimitHit) {
	s.log.Warn("sandbox limit hit", "session", id, "kernel", k.ID(), "limit", hit.Kind, "limits", hit.Summary, "action", hit.Message)
	s.m.LimitHits.WithLabelValues(hit.Kind).Inc()
	ls, err := s.Session(id)
	if err != nil {
		return // an ephemeral /api/execute session
	}
	payload := map[string]any{"sandbox_id": "sbx_" + k.ID(), "limit": hit.Kind, "message": hit.Message,
		"limits": map[string]any{"memory_bytes": hit.MemoryBytes, "cpus": hit.CPUs, "max_processes": hit.MaxProcesses}}
	ls.emit(context.Background(), carryover.EventSandboxLimitExceeded, payload)
}
