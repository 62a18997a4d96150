package kernel

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPoolGrowsUnderABurstAndShrinks: concurrent claims on an empty pool all get a kernel, started
// at most Parallel at a time, each handed out without onWarm (no claim waits for imports); the
// misses grow the target toward MaxSize, the pool refills to it (warming those), and once claims
// stop it shrinks back to Size.
func TestPoolGrowsUnderABurstAndShrinks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	warmed := map[string]bool{}
	starting, peak := 0, 0
	p := NewPoolWith(PoolConfig{Size: 0, MaxSize: 2, Parallel: 2, ShrinkAfter: time.Hour}, testOptions(t, "ipc"),
		func(ctx context.Context, k *Kernel) error {
			mu.Lock()
			starting++
			peak = max(peak, starting)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // overlap the starts, so a breach of Parallel shows
			mu.Lock()
			starting--
			mu.Unlock()
			return nil
		},
		func(ctx context.Context, k *Kernel) error {
			mu.Lock()
			warmed[k.ID()] = true
			mu.Unlock()
			return nil
		})
	ctx := context.Background()
	defer p.Close(ctx)
	const claims = 4
	got := make(chan *Kernel, claims)
	errs := make(chan error, claims)
	for range claims {
		go func() {
			k, err := p.Get(ctx)
			if err != nil {
				errs <- err
				return
			}
			got <- k
		}()
	}
	for range claims {
		select {
		case err := <-errs:
			t.Fatal(err)
		case k := <-got:
			defer k.Shutdown(ctx)
			mu.Lock()
			w := warmed[k.ID()]
			mu.Unlock()
			if w {
				t.Errorf("kernel %s was warmed before a waiting claim got it", k.ID())
			}
		}
	}
	st := p.Stats()
	if st.Misses != claims || st.Grown != 2 || st.Target != 2 {
		t.Errorf("after the burst: %+v, want %d misses and the target grown to 2", st, claims)
	}
	if !eventually(60*time.Second, func() bool { return p.Idle() == 2 }) {
		t.Fatalf("the pool did not refill to its grown target: %+v", p.Stats())
	}
	mu.Lock()
	if peak > 2 {
		t.Errorf("%d kernels started at once, Parallel is 2", peak)
	}
	mu.Unlock()
	p.mu.Lock()
	p.cfg.ShrinkAfter = time.Millisecond // claims have stopped: let it shrink now
	p.mu.Unlock()
	if !eventually(30*time.Second, func() bool { st := p.Stats(); return st.Target == 0 && st.Idle == 0 }) {
		t.Fatalf("the pool did not shrink back once claims stopped: %+v", p.Stats())
	}
}

// TestPoolClaimDoesNotWaitForRefillsWarming: a claim on a pool whose refills fill Parallel and are
// still warming (a server just started: its pool fills from empty) gets a kernel of its own, not
// one of theirs after its imports. The warm-ups here block until the test ends, so a claim that
// waits for them never returns.
func TestPoolClaimDoesNotWaitForRefillsWarming(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	warming := make(chan struct{}, 2)
	p := NewPoolWith(PoolConfig{Size: 2, MaxSize: 2, Parallel: 2}, testOptions(t, "ipc"), nil,
		func(ctx context.Context, k *Kernel) error {
			warming <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
	ctx := context.Background()
	defer p.Close(ctx)
	defer close(release)
	for range 2 { // both refills are warming: every start slot is theirs
		<-warming
	}
	claim, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	k, err := p.Get(claim)
	if err != nil {
		t.Fatalf("a claim behind two warming refills got no kernel: %v (%+v)", err, p.Stats())
	}
	defer k.Shutdown(ctx)
	if st := p.Stats(); st.Idle != 0 || st.Starting != 2 {
		t.Errorf("the refills were diverted: %+v, want both still warming", st)
	}
}

// TestKernelOOMScore: a kernel's processes carry KernelOOMScoreAdj; the server's own is untouched.
func TestKernelOOMScore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	before := readOOM(t, os.Getpid())
	k, err := Start(ctx, testOptions(t, "ipc"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(ctx)
	if got := readOOM(t, k.PID()); got != fmt.Sprint(KernelOOMScoreAdj) {
		t.Errorf("kernel oom_score_adj = %s, want %d", got, KernelOOMScoreAdj)
	}
	if got := readOOM(t, os.Getpid()); got != before {
		t.Errorf("the server's oom_score_adj changed: %s -> %s", before, got)
	}
}

func readOOM(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
