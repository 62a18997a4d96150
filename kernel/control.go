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

// Interrupt interrupts the running code: SIGINT to the process group for interrupt_mode "signal" (the
// default), an interrupt_request on control (waiting for its reply) for "message".
func (k *Kernel) Interrupt(ctx context.Context) error {
	inst, err := k.live(ctx)
	if err != nil {
		return fmt.Errorf("kernel %s: interrupt: %w", k.id, err)
	}
	if k.opts.Spec.InterruptMode == "message" {
		if _, err := k.request(ctx, inst, chControl, "interrupt_request", nil, "interrupt_reply"); err != nil {
			return fmt.Errorf("kernel %s: interrupt: %w", k.id, err)
		}
		return nil
	}
	if err := inst.proc.signalGroup(syscall.SIGINT); err != nil {
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
	inst, err := k.startInstance(ctx)
	if err != nil {
		inst = deadInstance(k, old, &DiedError{PID: old.proc.pid, ExitCode: -1, Reason: "restart failed: " + err.Error()})
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
// what is left of the process group, and removes the runtime dir. Calling it again is a no-op.
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
	inst.die(&DiedError{PID: p.pid, ExitCode: -1, Reason: reason})
	grace := k.opts.ShutdownGrace
	if p.alive() && ctx.Err() == nil && inst.socks != nil {
		if _, err := inst.send(chControl, "shutdown_request", nil, map[string]bool{"restart": restart}, nil); err == nil {
			waitExitCtx(ctx, p, grace)
		}
	}
	if p.alive() && ctx.Err() == nil {
		if err := p.signalGroup(syscall.SIGTERM); err != nil {
			k.log.Warn("shutdown: SIGTERM", "err", err)
		}
		waitExitCtx(ctx, p, grace)
	}
	if p.alive() {
		k.log.Warn("kernel ignored shutdown_request and SIGTERM; killing it", "pid", p.pid)
		p.kill()
	}
	if !p.alive() {
		// The kernel is reaped; whatever it left in its process group goes too.
		_ = p.signalGroup(syscall.SIGKILL)
	}
	if inst.socks != nil {
		inst.teardown()
	}
	if p.alive() {
		return fmt.Errorf("pid %d did not exit after SIGKILL", p.pid)
	}
	return nil
}

func waitExitCtx(ctx context.Context, p *process, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
	case <-ctx.Done():
	}
}
