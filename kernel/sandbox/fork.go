package sandbox

// fork.go makes a box's kernel by forking it from a warm template (kernel/template) instead of
// starting Python in the box. The box itself is made exactly as for a cold kernel (the same
// Command: cgroups joined, prlimit, bubblewrap with every mount and namespace, setpriv to the box's
// uid, the seccomp filter), but its first process is a holder that only sleeps. The template's
// child then enters that box: it joins the box's cgroups, takes the holder's rlimits and setns()es
// into all of the holder's namespaces, forks the kernel inside the box's pid namespace (reparented
// to the box's init), which drops to the box's uid without any capability, sets no_new_privs and
// loads the same seccomp program before it runs the kernel app (kernel/template/box.py). So the
// mounts, namespaces, uid, limits and filter are bubblewrap's own, not a second implementation of
// them; what the fork adds is checked by the kernel itself before it starts (box.check) and by the
// sandbox tests, which run on forked kernels.
//
// The box lives as long as its kernel: when the kernel exits, every process of the box is killed
// (as bubblewrap's init takes the box down when a cold kernel, its first process, exits), and the
// holder dying (killed from inside) takes the pid namespace and the kernel with it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/carryover/carryover/kernel"
)

// ForkBox describes a running box to a Forker.
type ForkBox struct {
	Holder  int      // host pid of the box's holder
	Start   uint64   // its start time (/proc/PID/stat), against pid reuse
	Cgroups []string // the cgroup.procs files of the box's groups
	Seccomp string   // the filter program's file ("": none)
	UID     int      // the box's uid (0: none of its own)
	Entered any      // what a BoxEnterer answered for this box, if it entered it ahead (nil: none)
}

// Forker makes kernels inside boxes: kernel/template's ForkBoxed, adapted by the server.
type Forker interface {
	// Fork makes the kernel spec asks for inside box with env as its whole environment, answering
	// its host pid and a channel closed once it exited. An error means no kernel was made.
	Fork(ctx context.Context, spec kernel.LaunchSpec, env map[string]string, box ForkBox) (int, <-chan struct{}, error)
	// Forkable tells whether Fork can make spec's kernel at all (its interpreter and argv, no
	// environment read at import, not Fresh): else it is started cold without a holder first.
	Forkable(spec kernel.LaunchSpec) bool
	Close() error
}

// BoxEnterer is a Forker that can do ahead the part of a fork into a box that does not depend on the
// kernel (entering the box's cgroups and namespaces), while the box waits as a spare (spare.go):
// its answer, given back in ForkBox.Entered, makes the later Fork only fork the kernel. A failure
// to enter is told by that Fork.
type BoxEnterer interface {
	Enter(ctx context.Context, box ForkBox) (any, error)
}

// holderWait bounds how long a launch waits for bubblewrap to set the holder's box up.
const holderWait = 30 * time.Second

// forked is what a boxKernel made by a Forker has besides the holder's wrapper process.
type forked struct {
	pid    int           // the kernel's host pid
	holder int           // the box's first process (sleeps)
	exited chan struct{} // closed once the kernel exited and the box was killed
}

// launchForked starts the holder's box and asks the Forker for the kernel inside it.
func (p *Provisioner) launchForked(ctx context.Context, spec kernel.LaunchSpec, kb *kernelBox, env map[string]string) (*boxKernel, error) {
	lp, err := p.startHolder(kb, Bind{Src: spec.RuntimeDir, Dst: spec.RuntimeDir}, env, spec.Dir, spec.LogPath)
	if err != nil {
		return nil, err
	}
	k := &boxKernel{boxProcess: boxProcess{LocalProcess: lp, box: kb.box}, kb: kb, logPath: spec.LogPath}
	holder, start, err := p.waitHolder(ctx, lp)
	if err != nil {
		k.boxProcess.Kill()
		return nil, err
	}
	return p.forkInto(ctx, spec, k, forkBox(kb.box, holder, start), env)
}

// forkBox describes box, whose holder runs, to the Forker.
func forkBox(box *Box, holder int, start uint64) ForkBox {
	fb := ForkBox{Holder: holder, Start: start, Seccomp: box.m.seccomp}
	if box.ownUID {
		fb.UID = box.uid
	}
	if box.cg != nil {
		fb.Cgroups = box.cg.procsFiles()
	}
	return fb
}

// startHolder starts the box's holder: the box's usual command, with rt (the runtime dir) bound in.
func (p *Provisioner) startHolder(kb *kernelBox, rt Bind, env map[string]string, dir, logPath string) (*kernel.LocalProcess, error) {
	argv := kb.box.Command(Command{Argv: []string{p.sleep, "infinity"}, Dir: "/workspace", Env: env, Binds: []Bind{rt}})
	return kb.box.Start(kernel.ProcessSpec{Argv: argv, Env: hostEnv, Dir: dir, LogPath: logPath})
}

// forkInto asks the Forker for spec's kernel inside k's box (fb: its running holder); on an error
// the box's processes are killed (the box itself stays the caller's).
func (p *Provisioner) forkInto(ctx context.Context, spec kernel.LaunchSpec, k *boxKernel, fb ForkBox, env map[string]string) (*boxKernel, error) {
	holder := fb.Holder
	pid, exited, err := p.cfg.Forker.Fork(ctx, spec, k.kb.box.boxEnv(env), fb)
	if err == nil {
		err = sameBox(pid, holder)
	}
	if err != nil {
		k.boxProcess.Kill()
		return nil, err
	}
	k.fk = &forked{pid: pid, holder: holder, exited: make(chan struct{})}
	k.top = pid
	go k.followFork(exited)
	return k, nil
}

// waitHolder waits until the holder runs: the wrapper's grandchild (bubblewrap's init's child)
// has exec'd the sleep, so the box's mounts, namespaces, uid and filter are all in place.
func (p *Provisioner) waitHolder(ctx context.Context, lp *kernel.LocalProcess) (int, uint64, error) {
	want := p.sleep + "\x00infinity\x00"
	deadline := time.NewTimer(holderWait)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, init := range childrenOf(lp.PID()) {
			for _, h := range childrenOf(init) {
				if b, err := os.ReadFile("/proc/" + strconv.Itoa(h) + "/cmdline"); err == nil && string(b) == want {
					if st, ok := procStat(h); ok {
						return h, st.start, nil
					}
				}
			}
		}
		select {
		case <-lp.Exited():
			return 0, 0, errors.New("sandbox: the box's holder exited before the kernel was forked (the kernel log says why)")
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-deadline.C:
			return 0, 0, errors.New("sandbox: the box's holder did not start")
		case <-tick.C:
		}
	}
}

// childrenOf lists pid's children (/proc/PID/task/PID/children).
func childrenOf(pid int) []int {
	s := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + s + "/task/" + s + "/children")
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// sameBox checks that pid (the forked kernel, as the pidfd watching it names it) is in the holder's
// pid namespace: a process that took over the pid of a kernel that died at once would not be.
func sameBox(pid, holder int) error {
	a, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return fmt.Errorf("sandbox: forked kernel %d: %w", pid, err)
	}
	b, err := os.Readlink("/proc/" + strconv.Itoa(holder) + "/ns/pid")
	if err != nil {
		return fmt.Errorf("sandbox: box holder %d: %w", holder, err)
	}
	if a != b {
		return fmt.Errorf("sandbox: forked kernel %d is not in its box (%s, box %s)", pid, a, b)
	}
	return nil
}

// followFork ends the box once its kernel exited (or the box died, which kills the kernel), then
// tells whoever waits on Exited.
func (k *boxKernel) followFork(exited <-chan struct{}) {
	select {
	case <-exited:
	case <-k.LocalProcess.Exited():
	}
	k.boxProcess.Kill()
	close(k.fk.exited)
}

// Exited is closed once the kernel exited: a cold kernel's wrapper, or a forked kernel and its box.
func (k *boxKernel) Exited() <-chan struct{} {
	if k.fk != nil {
		return k.fk.exited
	}
	return k.LocalProcess.Exited()
}

// ExitStatus is the wrapper's (bubblewrap passes a cold kernel's on). A forked kernel's is not known
// (the box's init reaps it): code -1.
func (k *boxKernel) ExitStatus() kernel.ExitStatus {
	if k.fk != nil {
		return kernel.ExitStatus{Code: -1}
	}
	return k.LocalProcess.ExitStatus()
}

// Kill SIGKILLs every process of the box and waits (bounded) for the kernel's exit.
func (k *boxKernel) Kill() {
	k.boxProcess.Kill()
	if k.fk != nil {
		select {
		case <-k.fk.exited:
		case <-time.After(5 * time.Second):
		}
	}
}

// Stats adds a forked kernel's own process group (it leads a session of its own, outside the
// groups of bubblewrap and its init) to the box's, and its box's memory charge as its own cost
// (kernel.ProcStats.OwnBytes): the pages it shares with the template are not its box's.
func (k *boxKernel) Stats() (kernel.ProcStats, error) {
	if k.fk == nil {
		return k.boxProcess.Stats()
	}
	st, err := k.boxProcess.stats(k.fk.pid)
	if err == nil && k.box.cg != nil {
		st.OwnBytes = k.box.cg.memoryCharged()
	}
	return st, err
}
