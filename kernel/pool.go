package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// RefillDelay is how long the pool waits after handing out a warm kernel before starting its
// replacement. A kernel start is ~0.6 s of CPU; begun at once, it ran beside the claimed kernel's first
// turn and, on a 2-core machine, made that turn 10-15 ms slower (create -> first result 33 ms against
// 20 ms with the start deferred). The first turn is over well within the delay.
const RefillDelay = 500 * time.Millisecond

// ErrPoolClosed is returned by Get after Close.
var ErrPoolClosed = errors.New("kernel pool is closed")

// Pool keeps `size` started kernels warm, so a new session does not pay the ~0.3-0.5 s of Python
// imports a kernel start costs. Get claims one (or starts one if none is warm) and the pool refills in
// the background, one start at a time: parallel starts only fight over the same CPUs.
type Pool struct {
	size    int
	opts    Options
	onStart func(context.Context, *Kernel) error
	onWarm  func(context.Context, *Kernel) error

	ctx    context.Context // cancelled by Close: aborts a start in progress
	cancel context.CancelFunc
	kick   chan struct{} // 1-slot: "check whether to refill"
	done   chan struct{} // closed when the refill goroutine exited

	mu     sync.Mutex
	idle   []*Kernel
	closed bool
}

// NewPool starts filling the pool in the background. onStart, when set, runs on each new kernel
// before it is pooled or handed out (e.g. to load an agent); a kernel whose onStart fails is shut down.
// onWarm, when set, runs after onStart only on kernels started to wait in the pool (e.g. to import
// modules sessions will want): a kernel started for a Get that found the pool empty skips it, so its
// caller never waits for work that only pays off later.
func NewPool(size int, opts Options, onStart, onWarm func(context.Context, *Kernel) error) *Pool {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		size:    size,
		opts:    opts,
		onStart: onStart,
		onWarm:  onWarm,
		ctx:     ctx,
		cancel:  cancel,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go p.refill()
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
// died while waiting is discarded, not handed out.
func (p *Pool) Get(ctx context.Context) (*Kernel, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		var k *Kernel
		if n := len(p.idle); n > 0 {
			k = p.idle[0] // oldest first: it has waited longest
			p.idle = append(p.idle[:0], p.idle[1:]...)
		}
		p.mu.Unlock()
		if k == nil {
			p.poke()
			return p.start(ctx)
		}
		time.AfterFunc(RefillDelay, p.poke)
		if k.Err() == nil {
			return k, nil
		}
		go func() { _ = k.Shutdown(context.Background()) }() // dead in the pool: reap it, try the next
	}
}

// Idle is the number of warm kernels waiting.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
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

// startWarm starts a kernel for the pool: start, then onWarm.
func (p *Pool) startWarm(ctx context.Context) (*Kernel, error) {
	k, err := p.start(ctx)
	if err != nil || p.onWarm == nil {
		return k, err
	}
	if err := p.onWarm(ctx, k); err != nil {
		_ = k.Shutdown(context.Background())
		return nil, fmt.Errorf("kernel pool: onWarm: %w", err)
	}
	return k, nil
}

// refill keeps the pool at size, starting one kernel at a time, with a backoff after failures so a
// broken interpreter does not become a fork loop.
func (p *Pool) refill() {
	defer close(p.done)
	log := p.opts.Logger
	backoff := time.Duration(0)
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			need := !p.closed && len(p.idle) < p.size
			p.mu.Unlock()
			if !need {
				break
			}
			k, err := p.startWarm(p.ctx)
			if err != nil {
				if p.ctx.Err() != nil {
					return
				}
				backoff = min(max(2*backoff, time.Second), time.Minute)
				log.Error("kernel pool: start failed", "err", err, "retry_in", backoff)
				select {
				case <-p.ctx.Done():
					return
				case <-time.After(backoff):
				}
				continue
			}
			backoff = 0
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				_ = k.Shutdown(context.Background())
				return
			}
			p.idle = append(p.idle, k)
			p.mu.Unlock()
		}
	}
}

// Close stops refilling (aborting a start in progress) and shuts down all idle kernels in parallel.
// Kernels already handed out by Get are the caller's.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	p.cancel()
	<-p.done
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
