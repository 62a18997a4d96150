package sandbox

// process.go holds the processes the Provisioner hands out: the wrapper that becomes bubblewrap runs
// as a kernel.LocalProcess on the host, and the box around it adds killing, limits and cleanup.

import (
	"os"
	"slices"
	"sync"
	"time"

	"github.com/carryover/carryover/kernel"
)

// boxProcess is a process whose command runs in box.
type boxProcess struct {
	*kernel.LocalProcess // the wrapper: sh -> prlimit -> bwrap, leading a process group of its own
	box                  *Box
}

// Kill SIGKILLs every process of the box, then the wrapper's group, and waits (bounded) for the reap.
func (p *boxProcess) Kill() {
	p.box.Kill()
	p.LocalProcess.Kill()
}

// Stats counts the wrapper's process group (bubblewrap outside the box) and the box's own: bubblewrap's
// init inside the box starts a new session (--new-session), so the kernel and what it runs are in
// init's process group, not in the wrapper's. One table serves all three lookups: the box's cgroup
// lists its processes, the wrapper included (it joins before it execs), so only those are read;
// without a cgroup, one pass over /proc. Three passes over /proc per turn made a sandboxed turn's
// cost sample 55% of the server's CPU under load (20 sessions on 2 cores).
func (p *boxProcess) Stats() (kernel.ProcStats, error) { return p.stats(0) }

// stats is Stats plus the process group of extra (0: none).
func (p *boxProcess) stats(extra int) (kernel.ProcStats, error) {
	t, err := p.box.statTable(p.PID())
	if err != nil {
		return kernel.ProcStats{}, err
	}
	st, err := t.Group(p.PID())
	if err != nil {
		return st, err
	}
	groups := t.Children(p.PID())
	if extra != 0 {
		groups = append(groups, extra)
	}
	for _, g := range groups {
		if in, err := t.Group(g); err == nil {
			st.CPUSeconds += in.CPUSeconds
			st.RSSBytes += in.RSSBytes
			st.ShmemBytes += in.ShmemBytes
		}
	}
	return st, nil
}

// statTable reads the stat lines of the box's processes: those its cgroup lists when leader (the
// wrapper) is among them, else every process on the host.
func (b *Box) statTable(leader int) (kernel.ProcTable, error) {
	if b.cg != nil {
		if pids := b.cg.pids(); slices.Contains(pids, leader) {
			return kernel.ReadProcs(pids), nil
		}
	}
	return kernel.ScanProcs()
}

// commandProcess is a shell command in a box of its own.
type commandProcess struct {
	boxProcess
}

// Cleanup kills what is left and releases the box.
func (c *commandProcess) Cleanup() error {
	c.Kill()
	return c.box.Release()
}

// kernelBox is the box of one kernel, shared by its processes across restarts.
type kernelBox struct {
	p     *Provisioner
	box   *Box
	spool string // host side of the checkpoint spool, idmapped at MountTarget("spool")

	mu       sync.Mutex
	onLimit  func(kernel.LimitHit)
	watching bool
}

// release frees the box (processes, mounts, cgroup, uid) and removes the spool dir.
func (kb *kernelBox) release() {
	kb.p.release(kb.box)
	_ = os.RemoveAll(kb.spool)
}

// boxKernel is a kernel process in its box.
type boxKernel struct {
	boxProcess
	kb      *kernelBox
	logPath string

	fk *forked // set for a kernel forked from a template into its box (fork.go)

	topMu sync.Mutex
	top   int // the kernel's host pid, once known (kernelProcess); a forked kernel's from the start
}

var _ kernel.KernelProcess = (*boxKernel)(nil)

// AttachWorkspace mounts hostDir at the box's /workspace; on a running box it propagates into the
// sandbox (the warm pool's claim). Attaching the same dir again is a no-op.
func (k *boxKernel) AttachWorkspace(hostDir string) error { return k.box.Attach(hostDir) }

// KernelPath maps a host path in the attached workspace to /workspace/...
func (k *boxKernel) KernelPath(hostPath string) string {
	return workspacePath(k.box.Attached(), hostPath)
}

// Spool is the host spool dir and where the kernel sees it.
func (k *boxKernel) Spool() (host, inside string) { return k.kb.spool, MountTarget("spool") }

// SetLimits applies a session's limits within the ceilings; what the host cannot apply is logged,
// not refused.
func (k *boxKernel) SetLimits(want kernel.Limits) error {
	lim, err := k.kb.p.limits(want)
	if err != nil {
		return err
	}
	if err := k.box.SetLimits(lim); err != nil {
		k.kb.p.log.Warn("sandbox: limits not fully applied", "box", k.box.Name(), "limits", lim.String(), "err", err)
	}
	return nil
}

// InterruptByMessage is true: SIGINT to the process group would hit bubblewrap, which dies of it and
// takes the kernel along; an interrupt_request makes ipykernel signal itself inside the box.
func (k *boxKernel) InterruptByMessage() bool { return true }

// OnLimit sets who hears of limit hits and starts watching the box (once per process).
func (k *boxKernel) OnLimit(f func(kernel.LimitHit)) {
	k.kb.mu.Lock()
	k.kb.onLimit = f
	start := !k.kb.watching
	k.kb.watching = true
	k.kb.mu.Unlock()
	if start {
		go k.watch()
	}
}

// rewatch starts watching a restarted kernel's box for the handler its previous process had; the
// previous watcher ends with that process, so it waits for that first.
func (k *boxKernel) rewatch() {
	k.kb.mu.Lock()
	f := k.kb.onLimit
	k.kb.mu.Unlock()
	if f == nil {
		return
	}
	go func() {
		for i := 0; i < 100; i++ { // the old watcher ends as soon as its process has exited
			k.kb.mu.Lock()
			busy := k.kb.watching
			k.kb.mu.Unlock()
			if !busy {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		k.OnLimit(f)
	}()
}

// Cleanup kills what is left and releases the box and the spool dir.
func (k *boxKernel) Cleanup() error {
	k.Kill()
	err := k.box.Release()
	_ = os.RemoveAll(k.kb.spool)
	return err
}
