package template

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/carryover/carryover/kernel"
)

// statusWait is how long a child's exit waits for its template's report of the exit status once
// the pidfd said it is gone (the template reaps it within milliseconds; a dead template never will).
const statusWait = time.Second

// child is a kernel forked by a template: a process of its own session and process group, with the
// server's privileges (as a local kernel), but the template's child, not the server's.
type child struct {
	pid    int
	spool  string
	boxed  bool  // made inside a sandbox: the box's init reaps it, the template reports nothing
	tmpl   *proc // the template that forked it (its status reports; its death)
	exited chan struct{}

	once   sync.Once
	status chan syscall.WaitStatus // 1 slot: the template's report
	mu     sync.Mutex
	state  kernel.ExitStatus
}

func newChild(pid int, spool string, boxed bool, t *proc) *child {
	return &child{pid: pid, spool: spool, boxed: boxed, tmpl: t, exited: make(chan struct{}),
		status: make(chan syscall.WaitStatus, 1), state: kernel.ExitStatus{Code: -1}}
}

// gone is called once the pidfd said the process exited: it waits (bounded) for the exit status
// the template reports, then marks the child exited.
func (c *child) gone() {
	if c.boxed {
		c.once.Do(func() { close(c.exited) })
		return
	}
	t := time.NewTimer(statusWait)
	defer t.Stop()
	select {
	case ws := <-c.status:
		c.mu.Lock()
		if ws.Signaled() {
			c.state = kernel.ExitStatus{Code: -1, Signal: ws.Signal()}
		} else {
			c.state = kernel.ExitStatus{Code: ws.ExitStatus()}
		}
		c.mu.Unlock()
	case <-c.tmpl.dead:
	case <-t.C:
	}
	c.once.Do(func() { close(c.exited) })
}

// reported is the template's report of the child's exit status.
func (c *child) reported(ws syscall.WaitStatus) {
	select {
	case c.status <- ws:
	default:
	}
}

func (c *child) PID() int                { return c.pid }
func (c *child) Exited() <-chan struct{} { return c.exited }

func (c *child) ExitStatus() kernel.ExitStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Signal sends sig to the child's process group (it leads one: setsid). Once it exited nothing is
// sent: its pid may be another process's by then.
func (c *child) Signal(sig syscall.Signal) error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	if err := syscall.Kill(-c.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to process group %d: %w", sig, c.pid, err)
	}
	return nil
}

// Kill SIGKILLs the group and waits (bounded) for the exit.
func (c *child) Kill() {
	_ = c.Signal(syscall.SIGKILL)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
	}
}

func (c *child) Stats() (kernel.ProcStats, error) { return kernel.GroupStats(c.pid) }

// Cleanup kills what is left of the group and removes the spool dir.
func (c *child) Cleanup() error {
	c.Kill()
	if c.spool != "" {
		return os.RemoveAll(c.spool)
	}
	return nil
}

// A forked kernel reaches every host path, enforces no limits and is interrupted by SIGINT, as a
// local kernel (kernel.LocalProvisioner).
func (c *child) AttachWorkspace(string) error      { return nil }
func (c *child) KernelPath(hostPath string) string { return hostPath }
func (c *child) Spool() (host, kernel string)      { return c.spool, c.spool }
func (c *child) SetLimits(kernel.Limits) error     { return nil }
func (c *child) InterruptByMessage() bool          { return false }
func (c *child) OnLimit(func(kernel.LimitHit))     {}
