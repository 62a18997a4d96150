package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// errShutDown is the death reason of calls made after Shutdown.
var errShutDown = errors.New("kernel is shut down")

// live returns the current incarnation for a new call. A call that arrives while Restart is replacing
// a process waits for the new one instead of failing on the old one.
func (k *Kernel) live(ctx context.Context) (*instance, error) {
	k.mu.RLock()
	inst, restarting := k.inst, k.restarting
	k.mu.RUnlock()
	if restarting != nil && inst.isDead() {
		select {
		case <-restarting:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for restart: %w", ctx.Err())
		}
		inst = k.current()
	}
	if err := inst.deadErr(); err != nil {
		return nil, err
	}
	return inst, nil
}

// Interrupts is how many times Interrupt was called: a caller waiting for a raw execute_reply
// compares it before and after (LostReplyGrace).
func (k *Kernel) Interrupts() uint64 { return k.interrupts.Load() }

// Interrupt interrupts the running code: SIGINT to the process group for interrupt_mode "signal" (the
// default), an interrupt_request on control (waiting for its reply) for "message" or when the process
// cannot be interrupted by a signal (KernelProcess.InterruptByMessage: a sandbox).
func (k *Kernel) Interrupt(ctx context.Context) error {
	k.interrupts.Add(1)
	inst, err := k.live(ctx)
	if err != nil {
		return fmt.Errorf("kernel %s: interrupt: %w", k.id, err)
	}
	if k.opts.Spec.InterruptMode == "message" || inst.proc.InterruptByMessage() {
		if _, err := k.request(ctx, inst, chControl, "interrupt_request", nil, "interrupt_reply"); err != nil {
			return fmt.Errorf("kernel %s: interrupt: %w", k.id, err)
		}
		return nil
	}
	if err := inst.proc.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("kernel %s: interrupt: %w", k.id, err)
	}
	return nil
}

// Restart stops the process (as Shutdown does, but keeping the runtime dir) and starts a new one with
// a new connection file, key and sockets; it returns when the new one is ready. The *Kernel stays the
// same; calls in flight on the old process fail with ErrDied (reason "restarted"), calls made during
// the restart wait for the new process. If the new process fails to start, the kernel stays dead with
// that reason.
func (k *Kernel) Restart(ctx context.Context) error {
	k.lifeMu.Lock()
	defer k.lifeMu.Unlock()
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return fmt.Errorf("kernel %s: restart: %w", k.id, errShutDown)
	}
	old := k.inst
	done := make(chan struct{})
	k.restarting = done
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.restarting = nil
		k.mu.Unlock()
		close(done)
	}()

	if err := k.stopInstance(ctx, old, "restarted", true); err != nil {
		k.log.Warn("restart: stopping the old process", "err", err)
	}
	inst, err := k.launchInstance(ctx, old.proc)
	if err != nil {
		inst = deadInstance(k, old, &DiedError{PID: old.proc.PID(), ExitCode: -1, Reason: "restart failed: " + err.Error()})
	}
	k.mu.Lock()
	k.inst = inst
	k.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kernel %s: restart: %w", k.id, err)
	}
	return nil
}

// deadInstance stands in for a process that could not be started, so that Dead/Err/PID keep answering.
func deadInstance(k *Kernel, old *instance, why *DiedError) *instance {
	inst := &instance{k: k, conn: old.conn, connFile: old.connFile, proc: old.proc, started: old.started,
		info: old.info, dead: make(chan struct{})}
	inst.die(why)
	return inst
}

// Shutdown stops the kernel for good: shutdown_request on control, then SIGTERM to the process group,
// then SIGKILL, each after ShutdownGrace (at once when ctx ends); it waits for the exit, reaps, kills
// what is left of the process group, has the provisioner release what the process held (Cleanup) and
// removes the runtime dir. Calling it again is a no-op.
func (k *Kernel) Shutdown(ctx context.Context) error {
	k.lifeMu.Lock()
	defer k.lifeMu.Unlock()
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	inst := k.inst
	k.mu.Unlock()
	err := k.stopInstance(ctx, inst, "shutdown", false)
	if cerr := inst.proc.Cleanup(); cerr != nil && err == nil {
		err = fmt.Errorf("cleanup: %w", cerr)
	}
	if rerr := os.RemoveAll(k.dir); rerr != nil && err == nil {
		err = fmt.Errorf("remove runtime dir: %w", rerr)
	}
	if err != nil {
		return fmt.Errorf("kernel %s: shutdown: %w", k.id, err)
	}
	return nil
}

// stopInstance ends one process politely, then firmly, and releases its sockets and goroutines.
func (k *Kernel) stopInstance(ctx context.Context, inst *instance, reason string, restart bool) error {
	p := inst.proc
	inst.die(&DiedError{PID: p.PID(), ExitCode: -1, Reason: reason})
	grace := k.opts.ShutdownGrace
	if !exited(p) && ctx.Err() == nil && inst.socks != nil {
		if _, err := inst.send(chControl, "shutdown_request", nil, map[string]bool{"restart": restart}, nil); err == nil {
			waitExitCtx(ctx, p, grace)
		}
	}
	if !exited(p) && ctx.Err() == nil {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			k.log.Warn("shutdown: SIGTERM", "err", err)
		}
		waitExitCtx(ctx, p, grace)
	}
	if !exited(p) {
		k.log.Warn("kernel ignored shutdown_request and SIGTERM; killing it", "pid", p.PID())
	}
	// Reaped or not, whatever is left of the process group (or box) goes too.
	p.Kill()
	if inst.socks != nil {
		inst.teardown()
	}
	if !exited(p) {
		return fmt.Errorf("pid %d did not exit after SIGKILL", p.PID())
	}
	return nil
}

func waitExitCtx(ctx context.Context, p Process, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.Exited():
	case <-t.C:
	case <-ctx.Done():
	}
}
