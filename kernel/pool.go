package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// RefillDelay is how long the pool waits after a claim of a warm kernel before it starts the
// replacements: a kernel start is ~0.6 s of CPU, and begun at once it ran beside the claimed
// kernel's first turn and, on a 2-core machine, made that turn 10-15 ms slower (create -> first
// result 33 ms against 20 ms with the start deferred). The delay runs from the LAST claim, so a burst
// of claims (a draining peer handing its sessions over: each restores a checkpoint into its kernel
// and runs the turn its client waits for) finishes before the refills take the CPU; it was 0 when
// a claim emptied the pool, and the refills' starts then ran beside those restores. A claim that
// finds the pool empty still gets a start of its own at once, and a steady stream of claims
// refills at least every MaxRefillDelay.
const RefillDelay = 500 * time.Millisecond

// MaxRefillDelay bounds how long claims in a row put the refills off (RefillDelay).
const MaxRefillDelay = 4 * RefillDelay

// DefaultShrinkAfter is PoolConfig.ShrinkAfter when unset.
const DefaultShrinkAfter = time.Minute

// ErrPoolClosed is returned by Get after Close.
var ErrPoolClosed = errors.New("kernel pool is closed")

// PoolConfig sizes a pool.
type PoolConfig struct {
	Size        int           // warm kernels kept waiting when claims are rare
	MaxSize     int           // what the pool grows to while claims outpace refills (< Size: Size)
	Parallel    int           // kernels started at once (<= 0: the CPUs this process may use)
	ShrinkAfter time.Duration // no claim this long: back to Size (<= 0: DefaultShrinkAfter)
}

// PoolStats are a pool's figures (the status endpoint and metrics).
type PoolStats struct {
	Idle, Starting, Target, Size, MaxSize int
	Claims, Misses, Grown                 int64
}

// Pool keeps started kernels warm, so a new session does not pay the ~0.3-0.5 s of a kernel start,
// nor the imports the pool's kernels make (onWarm). It adapts to demand: each claim that finds the
// pool empty (a miss: claims outpace refills) raises its target by one, up to MaxSize; after
// ShrinkAfter without a claim it shrinks back to Size. Kernels start in parallel, up to Parallel at
// once (more only fight over the same CPUs). A claim that finds the pool empty waits for the next
// kernel to come up: while claims wait, every start is for them, and a kernel started then is handed
// out right after onStart, skipping onWarm, so its caller never waits for imports that only pay off
// later (a warm kernel that comes up first is handed out instead). The pool refills toward its
// target, warming its kernels, once no claim waits.
type Pool struct {
	cfg     PoolConfig
	opts    Options
	onStart func(context.Context, *Kernel) error
	onWarm  func(context.Context, *Kernel) error

	ctx    context.Context // cancelled by Close: aborts starts in progress
	cancel context.CancelFunc
	kick   chan struct{}  // 1-slot: "check whether to start kernels"
	done   chan struct{}  // closed when the manager goroutine exited
	starts sync.WaitGroup // starter goroutines

	mu           sync.Mutex
	idle         []*Kernel
	waiters      []chan poolResult // claims waiting for a kernel, FIFO
	starting     int
	startingW    int // of starting: those started for waiting claims (handed over unwarmed)
	target       int
	lastClaim    time.Time
	refillOwed   time.Time     // the first claim since the last refill began (zero: none owed)
	backoff      time.Duration // after failed starts: the pool's own refills pause
	backoffUntil time.Time
	claims       int64
	misses       int64
	grown        int64
	closed       bool
}

// poolResult is what a waiting claim receives.
type poolResult struct {
	k   *Kernel
	err error
}

// NewPool is NewPoolWith a fixed size (MaxSize = size).
func NewPool(size int, opts Options, onStart, onWarm func(context.Context, *Kernel) error) *Pool {
	return NewPoolWith(PoolConfig{Size: size, MaxSize: size}, opts, onStart, onWarm)
}

// NewPoolWith starts filling the pool in the background. onStart, when set, runs on each new kernel
// before it is pooled or handed out (e.g. to load an agent); a kernel whose onStart fails is shut down.
// onWarm, when set, runs after onStart only on kernels that go to wait in the pool (e.g. to import
// modules sessions will want).
func NewPoolWith(cfg PoolConfig, opts Options, onStart, onWarm func(context.Context, *Kernel) error) *Pool {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cfg.Size = max(cfg.Size, 0)
	cfg.MaxSize = max(cfg.MaxSize, cfg.Size)
	if cfg.Parallel <= 0 {
		cfg.Parallel = max(runtime.GOMAXPROCS(0), 1)
	}
	if cfg.ShrinkAfter <= 0 {
		cfg.ShrinkAfter = DefaultShrinkAfter
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		cfg:     cfg,
		opts:    opts,
		onStart: onStart,
		onWarm:  onWarm,
		ctx:     ctx,
		cancel:  cancel,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		target:  cfg.Size,
	}
	go p.manage()
	p.poke()
	return p
}

func (p *Pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Get returns a ready kernel that now belongs to the caller (who shuts it down). A pooled kernel that
// died while waiting is discarded, not handed out. On an empty pool it waits for the next kernel
// to come up (ctx ends the wait).
func (p *Pool) Get(ctx context.Context) (*Kernel, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		p.claims++
		p.lastClaim = time.Now()
		if p.refillOwed.IsZero() {
			p.refillOwed = p.lastClaim
			time.AfterFunc(MaxRefillDelay, p.poke)
		}
		if len(p.idle) == 0 {
			return p.wait(ctx) // unlocks
		}
		k := p.idle[0] // oldest first: it has waited longest
		p.idle = append(p.idle[:0], p.idle[1:]...)
		p.mu.Unlock()
		time.AfterFunc(RefillDelay, p.poke)
		if k.Err() == nil {
			return k, nil
		}
		go func() { _ = k.Shutdown(context.Background()) }() // dead in the pool: reap it, try the next
	}
}

// wait is Get on an empty pool: a miss, which grows the target. Called with p.mu held; unlocks it.
func (p *Pool) wait(ctx context.Context) (*Kernel, error) {
	p.misses++
	if p.target < p.cfg.MaxSize {
		p.target++
		p.grown++
	}
	ch := make(chan poolResult, 1)
	p.waiters = append(p.waiters, ch)
	p.mu.Unlock()
	p.poke()
	select {
	case r := <-ch:
		return r.k, r.err
	case <-ctx.Done():
		p.mu.Lock()
		removed := false
		for i, w := range p.waiters {
			if w == ch {
				p.waiters = append(p.waiters[:i:i], p.waiters[i+1:]...)
				removed = true
				break
			}
		}
		p.mu.Unlock()
		if !removed { // a kernel is on its way to us: keep it for the next claim
			go func() {
				if r := <-ch; r.k != nil {
					p.put(r.k)
				}
			}()
		}
		return nil, ctx.Err()
	}
}

// Idle is the number of warm kernels waiting.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Stats are the pool's figures now.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Idle: len(p.idle), Starting: p.starting, Target: p.target, Size: p.cfg.Size,
		MaxSize: p.cfg.MaxSize, Claims: p.claims, Misses: p.misses, Grown: p.grown}
}

// manage starts kernels when kicked and shrinks the pool once claims stop.
func (p *Pool) manage() {
	defer close(p.done)
	tick := time.NewTicker(min(max(p.cfg.ShrinkAfter/4, 50*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		case <-tick.C:
			p.shrink()
		}
		p.launch()
	}
}

// launch starts as many kernels as the waiting claims, or else the target, need, up to Parallel at
// once for each.
func (p *Pool) launch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	// Waiting claims first: while any wait, new starts are for them (their kernels go to the first of
	// them unwarmed); the pool refills toward its target, warming its kernels, once none wait. A refill
	// already under way is not counted as serving a waiter and is never handed over before it is
	// warm: under steady claims that arrive while refills start, diverting them left the pool never
	// warm (no session ever found pre_import's modules loaded).
	//
	// A waiting claim has a start of its own even while refills fill Parallel: Parallel bounds the
	// refills and, apart, the starts for claims (so at most twice Parallel at once). Counted
	// together, a claim behind refills waited for their imports too: the first cell after a
	// restart of carryover, which finds the pool refilling from empty, waited 25-30 s on a loaded
	// 2-core machine with the sandbox on (pre_import numpy, pandas, matplotlib) instead of ~2 s.
	for need := len(p.waiters) - p.startingW; need > 0 && p.startingW < p.cfg.Parallel; need-- {
		p.starting++
		p.startingW++
		p.starts.Add(1)
		go p.startOne(true)
	}
	if len(p.waiters) > 0 || time.Now().Before(p.backoffUntil) { // after failed starts: no fork loop
		return
	}
	if owed := p.refillOwed; !owed.IsZero() {
		if time.Since(p.lastClaim) < RefillDelay && time.Since(owed) < MaxRefillDelay {
			return // claims keep coming: their restores and first turns first (RefillDelay)
		}
		p.refillOwed = time.Time{}
	}
	for need := p.target - len(p.idle) - p.starting; need > 0 && p.starting < p.cfg.Parallel; need-- {
		p.starting++
		p.starts.Add(1)
		go p.startOne(false)
	}
}

// startOne starts one kernel; one started for a waiting claim goes to the first waiting claim
// unwarmed, or (none waits any more) is warmed and pooled, as a refill is.
func (p *Pool) startOne(forWaiter bool) {
	defer p.starts.Done()
	defer p.poke() // one start ended: maybe start another
	k, err := p.start(p.ctx)
	if forWaiter {
		p.mu.Lock()
		p.startingW--
		p.mu.Unlock()
		if err == nil && p.handOut(k, false) {
			return
		}
	}
	if err == nil && p.onWarm != nil {
		if err = p.onWarm(p.ctx, k); err != nil {
			_ = k.Shutdown(context.Background())
			err = fmt.Errorf("kernel pool: onWarm: %w", err)
		}
	}
	if err != nil {
		p.failed(err)
		return
	}
	p.handOut(k, true)
}

// handOut gives k to the first waiting claim; with pool, when none waits, it joins the idle kernels.
// It reports whether k found a home. The start it ends is no longer counted then.
func (p *Pool) handOut(k *Kernel, pool bool) bool {
	p.mu.Lock()
	var w chan poolResult
	if len(p.waiters) > 0 {
		w = p.waiters[0]
		p.waiters = p.waiters[1:]
	} else if !pool {
		p.mu.Unlock()
		return false
	}
	p.starting--
	p.backoff = 0
	closed := p.closed
	if w == nil && !closed {
		p.idle = append(p.idle, k)
	}
	p.mu.Unlock()
	switch {
	case w != nil:
		w <- poolResult{k: k}
	case closed:
		_ = k.Shutdown(context.Background())
	}
	return true
}

// failed ends a start that failed: the first waiting claim gets the error (as a claim that started
// its own kernel would have), and the pool's own refills back off.
func (p *Pool) failed(err error) {
	p.mu.Lock()
	p.starting--
	if p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.backoff = min(max(2*p.backoff, time.Second), time.Minute)
	p.backoffUntil = time.Now().Add(p.backoff)
	retry := p.backoff
	var w chan poolResult
	if len(p.waiters) > 0 {
		w = p.waiters[0]
		p.waiters = p.waiters[1:]
	}
	p.mu.Unlock()
	p.opts.Logger.Error("kernel pool: start failed", "err", err, "retry_in", retry)
	if w != nil {
		w <- poolResult{err: err}
	}
	time.AfterFunc(retry, p.poke)
}

// put returns an unused kernel to the pool (a claim that gave up while it was on its way).
func (p *Pool) put(k *Kernel) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = k.Shutdown(context.Background())
		return
	}
	p.idle = append(p.idle, k)
	p.mu.Unlock()
}

// shrink brings the target back to Size once no claim came for ShrinkAfter, and stops the idle
// kernels beyond the target (the newest: the oldest have waited longest and go out first anyway).
func (p *Pool) shrink() {
	p.mu.Lock()
	if p.closed || p.target <= p.cfg.Size || len(p.waiters) > 0 || time.Since(p.lastClaim) < p.cfg.ShrinkAfter {
		p.mu.Unlock()
		return
	}
	p.target = p.cfg.Size
	var extra []*Kernel
	if n := len(p.idle) - p.target; n > 0 {
		extra = append(extra, p.idle[p.target:]...)
		p.idle = p.idle[:p.target]
	}
	p.mu.Unlock()
	for _, k := range extra {
		go func() { _ = k.Shutdown(context.Background()) }()
	}
}

// start launches one kernel and runs onStart on it.
func (p *Pool) start(ctx context.Context) (*Kernel, error) {
	k, err := Start(ctx, p.opts)
	if err != nil {
		return nil, err
	}
	if p.onStart != nil {
		if err := p.onStart(ctx, k); err != nil {
			_ = k.Shutdown(context.Background())
			return nil, fmt.Errorf("kernel pool: onStart: %w", err)
		}
	}
	return k, nil
}

// Close stops refilling (aborting starts in progress), fails the waiting claims and shuts down all
// idle kernels in parallel. Kernels already handed out by Get are the caller's.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	waiters := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	for _, w := range waiters {
		w <- poolResult{err: ErrPoolClosed}
	}
	p.cancel()
	<-p.done
	p.starts.Wait()
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	errs := make(chan error, len(idle))
	for _, k := range idle {
		go func() { errs <- k.Shutdown(ctx) }()
	}
	var all []error
	for range idle {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}
