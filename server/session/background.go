package session

import (
	"context"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/capacity"
	"github.com/carryover/carryover/server/session/sessiondoc"
)

// The background loop keeps agent sessions healthy without babysitting: it rotates kernels before
// their sandbox.timeout_seconds, hibernates idle ones (cull.idle_seconds) and samples cost.

// startBackground starts the loop; Close stops it.
func (s *Service) StartBackground() {
	s.mu.Lock()
	if s.bg.stop != nil {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.bg.stop = cancel
	s.mu.Unlock()
	s.bg.wg.Add(1)
	go func() {
		defer s.bg.wg.Done()
		tick := time.NewTicker(s.cfg.tickEvery())
		defer tick.Stop()
		lastCull := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, ls := range s.liveSessions() {
				ls.sampleLiveCost(ctx)
			}
			s.relieveMemory(ctx)
			s.updateGauges()
			s.rotateDue(ctx)
			s.adm.idem.Expire(ctx)
			s.adm.ephemeral.Expire(ctx)
			if iv := s.cfg.CullInterval; s.cfg.CullIdle > 0 && time.Since(lastCull) >= iv {
				lastCull = time.Now()
				for _, ls := range s.liveSessions() {
					ls.hibernateIfIdle(ctx, s.cfg.CullIdle)
				}
			}
		}
	}()
}

// tickEvery is the loop period: fine enough for second-level rotation deadlines.
func (c Config) tickEvery() time.Duration {
	d := 500 * time.Millisecond
	if iv := c.CullInterval; iv > 0 && iv < d {
		d = iv
	}
	return d
}

// liveSessions returns the sessions that currently hold a kernel.
func (s *Service) liveSessions() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Session
	for _, ls := range s.sessions {
		if ls.currentKernel() != nil {
			out = append(out, ls)
		}
	}
	return out
}

// rotateDue starts a rotation for every running session whose kernel is within
// rotation.pre_rotate_buffer_seconds of sandbox.timeout_seconds. Paused time does not count: the
// kernel's age only grows while the session is not paused.
func (s *Service) rotateDue(ctx context.Context) {
	for _, ls := range s.liveSessions() {
		doc := ls.docCopy()
		at := sessiondoc.RotateAge(doc)
		if doc.State != carryover.StateRunning || at <= 0 {
			continue
		}
		ls.mu.Lock()
		age := ls.kernelAge(time.Now())
		due := !ls.rotating && age >= at
		if due {
			ls.rotating = true
		}
		ls.mu.Unlock()
		if !due {
			continue
		}
		s.bg.wg.Add(1)
		go func(ls *Session) {
			defer s.bg.wg.Done()
			defer func() { ls.mu.Lock(); ls.rotating = false; ls.mu.Unlock() }()
			// Queue behind a run in progress: rotation waits for it, later runs wait for rotation.
			if err := ls.lock.Lock(ctx); err != nil {
				return
			}
			defer ls.lock.Unlock()
			if st := ls.docCopy().State; st != carryover.StateRunning || ls.currentKernel() == nil {
				return
			}
			if _, err := ls.rotateLocked(ctx, "sandbox timeout"); err != nil {
				s.log.Warn("rotation failed", "session", ls.id, "err", err)
			}
		}(ls)
	}
}

// kernelAge is how long the current kernel has lived, paused time excluded. Caller holds ls.mu.
func (ls *Session) kernelAge(now time.Time) time.Duration {
	if ls.kernStart.IsZero() {
		return 0
	}
	age := now.Sub(ls.kernStart) - ls.pausedFor
	if !ls.pausedAt.IsZero() {
		age -= now.Sub(ls.pausedAt)
	}
	return age
}

// hibernateIfIdle hibernates the session when it has been idle for cull.idle_seconds (idle):
// checkpoint, then stop the kernel. The session keeps its state (running, or paused); its next run
// restores it transparently.
func (ls *Session) hibernateIfIdle(ctx context.Context, idle time.Duration) {
	doc := ls.docCopy()
	if !hibernatable(doc.State) || time.Since(doc.LastActivity) < idle || ls.lock.Busy() {
		return
	}
	if !ls.lock.TryLock() {
		return
	}
	defer ls.lock.Unlock()
	doc = ls.docCopy()
	if !hibernatable(doc.State) || time.Since(doc.LastActivity) < idle {
		return
	}
	if err := ls.hibernateLocked(ctx, capacity.ReasonIdle); err != nil {
		// Never stop a kernel whose state is not saved.
		ls.svc.log.Warn("hibernation skipped", "session", ls.id, "err", err)
	}
}

// Hibernate checkpoints the session and stops its kernel now (POST .../hibernate): its memory is
// freed and the next run restores it.
func (ls *Session) Hibernate(ctx context.Context) (carryover.Session, error) {
	if err := ls.lock.Lock(ctx); err != nil {
		return carryover.Session{}, err
	}
	defer ls.lock.Unlock()
	if st := ls.docCopy().State; st != carryover.StateRunning {
		return carryover.Session{}, carryover.Errorf(carryover.CodeConflict, "only a running session can hibernate; this one is %s", st).WithDetails("state", st)
	}
	if err := ls.hibernateLocked(context.WithoutCancel(ctx), capacity.ReasonRequested); err != nil {
		return carryover.Session{}, err
	}
	return ls.docCopy(), nil
}

// hibernateLocked saves the session and stops its kernel. Caller holds ls.lock.
func (ls *Session) hibernateLocked(ctx context.Context, reason string) error {
	s := ls.svc
	k := ls.currentKernel()
	if k == nil {
		return nil
	}
	res, err := ls.checkpoint(ctx, k)
	if err != nil {
		return fmt.Errorf("checkpoint before hibernation: %w", err)
	}
	ls.releaseKernel(ctx, reason)
	if err := ls.setSandboxStatus(ctx, carryover.SandboxHibernated); err != nil {
		return err
	}
	s.watch.CountHibernation(reason)
	ls.emit(ctx, carryover.EventSessionHibernated, map[string]any{"checkpoint_id": res.ID, "reason": reason})
	return nil
}
