package sandbox

// spare.go keeps a few boxes ready for kernels forked from the template (pool.spare_boxes): making a
// box (its dir, uid, cgroup, /tmp, spool mount, then bubblewrap's namespaces and mounts around the
// holder) was 250-660 ms of a forked kernel's start, paid while the claim waited. A spare is that
// box with its holder already running, entered ahead by the template's children when the Forker is
// a BoxEnterer (their cgroup move alone waits 10-17 ms for an RCU grace period); a launch takes one
// and only forks the kernel into it.
//
// Everything a box has is the same in a spare, except what belongs to the kernel and is known only
// at launch: its runtime dir (connection file, ipc sockets), which must appear in the box at its
// host path. A spare binds an empty dir of its own (<box>/rt) at the runtime dirs' parent (the
// kernel package's runtime base, learnt from the first launch); at launch the server bind-mounts the
// kernel's runtime dir below it on the host side, which propagates into the running box as the
// workspace's claim does (mount.go). So the box sees its own kernel's runtime dir there and no other.
// Spares serve only the boxes a default launch makes: no network, no egress allowlist, not a restart
// (which keeps its box), not Fresh.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/carryover/carryover/kernel"
	"golang.org/x/sys/unix"
)

// runtimeMount is the name of a spare's dir bound at the runtime base (b.mounts holds
// "rt/<kernel dir>" while a kernel's runtime dir is mounted below it). Not bound under
// /run/carryover.
const runtimeMount = "rt"

// spares is the stock of ready boxes.
type spares struct {
	p    *Provisioner
	want int

	ctx    context.Context // ended by close: a spare being made is dropped
	cancel context.CancelFunc

	mu     sync.Mutex
	base   string // the runtime base the spares bind ("": no launch seen yet)
	ready  []*spare
	making bool
	wg     sync.WaitGroup

	served, missed atomic.Int64
}

// spare is a box whose holder runs, entered ahead when the Forker can (fb.Entered).
type spare struct {
	kb *kernelBox
	lp *kernel.LocalProcess
	fb ForkBox
}

func newSpares(p *Provisioner, want int) *spares {
	ctx, cancel := context.WithCancel(context.Background())
	return &spares{p: p, want: want, ctx: ctx, cancel: cancel}
}

// take hands out a ready box for a kernel whose runtime dir is below base (nil: none), and starts
// making its replacement.
func (s *spares) take(base string) *spare {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base != base {
		// The first launch (or a new base): the spares made for another one are of no use.
		s.base = base
		s.dropLocked()
	}
	defer s.fillLocked()
	for len(s.ready) > 0 {
		sp := s.ready[0]
		s.ready = s.ready[1:]
		select {
		case <-sp.lp.Exited(): // its holder died (killed from outside): not a box to use
			sp.kb.release()
			continue
		default:
		}
		s.served.Add(1)
		return sp
	}
	s.missed.Add(1)
	return nil
}

// dropLocked releases the ready boxes.
func (s *spares) dropLocked() {
	for _, sp := range s.ready {
		sp.kb.release()
	}
	s.ready = nil
}

// fillLocked starts making boxes, one at a time (each is a bubblewrap start: a burst of them would
// take the CPU from the kernels being claimed), until want are ready.
func (s *spares) fillLocked() {
	if s.making || len(s.ready) >= s.want || s.base == "" || s.ctx.Err() != nil {
		return
	}
	s.making = true
	base := s.base
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		sp, err := s.p.makeSpare(s.ctx, base)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.making = false
		switch {
		case err != nil:
			if s.ctx.Err() == nil {
				s.p.log.Warn("sandbox: a spare box could not be made", "err", err)
			}
			return // the next take tries again
		case s.ctx.Err() != nil || s.base != base:
			sp.kb.release()
			return
		}
		s.ready = append(s.ready, sp)
		s.fillLocked()
	}()
}

// close releases the ready boxes and waits for one being made.
func (s *spares) close() {
	if s == nil {
		return
	}
	s.mu.Lock() // fillLocked adds to wg under mu, after checking ctx: no Add races the Wait
	s.cancel()
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	s.dropLocked()
	s.mu.Unlock()
}

// stats are the figures of the stock.
func (s *spares) stats() kernel.SpareBoxStats {
	if s == nil {
		return kernel.SpareBoxStats{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return kernel.SpareBoxStats{Ready: len(s.ready), Want: s.want, Served: s.served.Load(), Missed: s.missed.Load()}
}

// Spares are the spare boxes' figures (zero without pool.spare_boxes or the template).
func (p *Provisioner) Spares() kernel.SpareBoxStats { return p.spares.stats() }

// TemplateStats are the Forker's template figures (when it reports them), this provisioner's cold
// starts of forkable-in-principle kernels added, and the spare boxes'; ok is false without a Forker.
func (p *Provisioner) TemplateStats() (kernel.TemplateStats, bool) {
	if p.cfg.Forker == nil {
		return kernel.TemplateStats{}, false
	}
	var ts kernel.TemplateStats
	if r, ok := p.cfg.Forker.(kernel.TemplateReporter); ok {
		ts, _ = r.TemplateStats()
	}
	ts.ColdFallbacks += p.cold.Load()
	if p.spares != nil {
		sp := p.spares.stats()
		ts.SpareBoxes = &sp
	}
	return ts, true
}

// makeSpare makes a kernel box with its holder running, its rt dir bound at base.
func (p *Provisioner) makeSpare(ctx context.Context, base string) (*spare, error) {
	kb, err := p.newKernelBox(fmt.Sprintf("s%d", p.seq.Add(1)), false, nil)
	if err != nil {
		return nil, err
	}
	rt := filepath.Join(kb.box.dir, runtimeMount)
	if err := os.Mkdir(rt, 0o755); err != nil {
		kb.release()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	lp, err := p.startHolder(kb, Bind{Src: rt, Dst: base}, p.launchEnv(nil), "/", os.DevNull)
	if err != nil {
		kb.release()
		return nil, err
	}
	holder, start, err := p.waitHolder(ctx, lp)
	if err != nil {
		lp.Kill()
		kb.release()
		return nil, err
	}
	sp := &spare{kb: kb, lp: lp, fb: forkBox(kb.box, holder, start)}
	if e, ok := p.cfg.Forker.(BoxEnterer); ok {
		// Not entered: the kernel's fork enters it, as into a box made at launch.
		if sp.fb.Entered, err = e.Enter(ctx, sp.fb); err != nil && ctx.Err() == nil {
			p.log.Warn("sandbox: a spare box was not entered ahead", "box", kb.box.Name(), "err", err)
		}
	}
	return sp, nil
}

// bindRuntime mounts the kernel's runtime dir below the spare's rt dir, where the box sees it at
// its host path (the propagation of mount.go). Release unmounts it.
func (b *Box) bindRuntime(dir string) error {
	name := runtimeMount + "/" + filepath.Base(dir)
	target := filepath.Join(b.dir, name)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released {
		return errors.New("sandbox: box is released")
	}
	if err := os.Mkdir(target, 0o700); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := unix.Mount(dir, target, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(target)
		return fmt.Errorf("sandbox: bind the runtime dir: %w", err)
	}
	b.mounts[name] = dir
	return nil
}

// launchSpare forks spec's kernel into a spare box.
func (p *Provisioner) launchSpare(ctx context.Context, spec kernel.LaunchSpec, sp *spare, env map[string]string) (*boxKernel, error) {
	k := &boxKernel{boxProcess: boxProcess{LocalProcess: sp.lp, box: sp.kb.box}, kb: sp.kb, logPath: spec.LogPath}
	if err := sp.kb.box.bindRuntime(spec.RuntimeDir); err != nil {
		k.boxProcess.Kill()
		return nil, err
	}
	return p.forkInto(ctx, spec, k, sp.fb, env)
}
