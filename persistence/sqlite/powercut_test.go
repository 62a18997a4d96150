package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/carryover/carryover/internal/sandboxtest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/powercut"
)

// TestPowerCut cuts the power of a real ext4 disk (internal/powercut) under a writer at a moment
// picked from a seed, several times per synchronous mode: with full, every commit that returned is
// there after the cut (the store's promise: answered = on disk) and the file passes integrity_check;
// with normal, commits that returned are lost, which is what the setting's documentation says.
// "full-deferred" is full with a turn's writes: commits under carryover.DeferSync, three at a time,
// acknowledged when the Sync after them returns (walsync.go): none may be lost either.
// CARRYOVER_POWERCUT_ROUNDS raises the number of cuts (make chaos: 100).
func TestPowerCut(t *testing.T) {
	if why := powercut.Available(); why != "" {
		sandboxtest.Missing(t, why)
	}
	rounds := 8
	if n, err := fmt.Sscan(os.Getenv("CARRYOVER_POWERCUT_ROUNDS"), &rounds); n == 1 && err == nil {
		t.Logf("%d rounds", rounds)
	}
	for _, name := range []string{string(SyncFull), "full-deferred", string(SyncNormal)} {
		mode, deferred := Synchronous(name), name == "full-deferred"
		if deferred {
			mode = SyncFull
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lost := powerCutRounds(t, mode, deferred, rounds)
			switch {
			case mode == SyncFull && lost > 0:
				t.Fatalf("synchronous %s lost %d acknowledged commits over %d cuts", name, lost, rounds)
			case mode == SyncNormal && lost == 0:
				t.Fatalf("synchronous normal lost nothing over %d cuts: the cut drops nothing, the test proves nothing", rounds)
			}
			t.Logf("synchronous %s: %d acknowledged commits lost over %d cuts", name, lost, rounds)
		})
	}
}

// powerCutRounds runs the rounds on one disk and returns how many acknowledged commits were lost.
func powerCutRounds(t *testing.T, mode Synchronous, deferred bool, rounds int) (lost int) {
	d, err := powercut.New(t.TempDir(), 128<<20, 7)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	path := filepath.Join(d.Dir, "carryover.db")
	next := 0 // ids are s0, s1, ... across rounds: a round's survivors are all below its acked count
	for round := range rounds {
		st, err := OpenWith(path, Options{Synchronous: mode})
		if err != nil {
			t.Fatalf("round %d: open after the cut: %v", round, err)
		}
		var acked atomic.Int64
		acked.Store(int64(next))
		stop := make(chan struct{})
		done := make(chan struct{})
		go powerCutWriter(ctx, st, next, deferred, &acked, stop, done)
		time.Sleep(time.Duration(20+(round*37)%200) * time.Millisecond)
		before := acked.Load() // every commit acknowledged before the cut
		if _, err := d.Cut(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-done
		st.Close()
		if err := d.Unmount(); err != nil {
			t.Fatal(err)
		}
		if err := d.Mount(); err != nil {
			t.Fatal(err)
		}
		st, err = OpenWith(path, Options{Synchronous: mode})
		if err != nil {
			t.Fatalf("round %d: open after the cut: %v", round, err)
		}
		var res string
		if err := st.db.Get(&res, `PRAGMA integrity_check`); err != nil || res != "ok" {
			t.Fatalf("round %d: integrity_check after the cut: %q %v", round, res, err)
		}
		var have int
		if err := st.db.Get(&have, `SELECT count(*) FROM sessions`); err != nil {
			t.Fatal(err)
		}
		if int64(have) < before {
			lost += int(before) - have
		}
		next = have
		// The next round's ids continue after the survivors; a commit the cut kept although it was
		// never acknowledged is allowed (it was in flight), so delete nothing.
		st.Close()
	}
	return lost
}

// powerCutWriter commits sessions s<next>, s<next+1>, ... until stop, storing in acked how many are
// acknowledged: each when CreateSession returns, or (deferred) three commits under
// carryover.DeferSync at a time, when the Sync after them returns.
func powerCutWriter(ctx context.Context, st *Store, next int, deferred bool, acked *atomic.Int64, stop, done chan struct{}) {
	defer close(done)
	wctx := ctx
	if deferred {
		wctx = carryover.DeferSync(ctx)
	}
	for i := next; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		now := time.Now().UTC()
		if err := st.CreateSession(wctx, carryover.SessionRecord{ID: fmt.Sprintf("s%d", i), State: "running",
			Doc: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now}); err != nil {
			return
		}
		if !deferred {
			acked.Store(int64(i + 1))
		} else if (i-next)%3 == 2 {
			if err := st.Sync(ctx); err != nil {
				return
			}
			acked.Store(int64(i + 1))
		}
	}
}
