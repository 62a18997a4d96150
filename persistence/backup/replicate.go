package backup

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Prune deletes the snapshots that finished before keepAfter, never the newest, then the pieces no
// remaining snapshot lists. A piece younger than grace is kept even so: a snapshot being taken
// beside this one (`carryover backup` to the same target) uploads its pieces before its manifest.
func Prune(ctx context.Context, t Target, keepAfter time.Time, grace time.Duration) (snapshots, pieces int, err error) {
	ms, err := List(ctx, t)
	if err != nil {
		return 0, 0, err
	}
	used := map[string]bool{}
	var drop []string
	for i, m := range ms {
		if i < len(ms)-1 && m.Finished.Before(keepAfter) {
			drop = append(drop, m.Key)
			continue
		}
		for _, p := range m.Pieces {
			used[pieceKey(p)] = true
		}
	}
	if err := t.Delete(ctx, drop); err != nil {
		return 0, 0, err
	}
	var orphans []string
	cutoff := time.Now().Add(-grace)
	err = t.List(ctx, "pieces/", func(key string, modified time.Time) error {
		if !used[key] && modified.Before(cutoff) {
			orphans = append(orphans, key)
		}
		return nil
	})
	if err != nil {
		return len(drop), 0, err
	}
	return len(drop), len(orphans), t.Delete(ctx, orphans)
}

// Replicator snapshots a live store every Interval while it changed, and prunes past Retention.
type Replicator struct {
	Source    Source
	Changed   func(ctx context.Context) (bool, error) // nil: always
	Target    Target
	TmpDir    string
	Name      string
	Interval  time.Duration
	Retention time.Duration
	Log       *slog.Logger
	OnClose   func() // after the last snapshot (releases what Changed holds)

	known map[string]bool
	mu    sync.Mutex // one snapshot at a time (the loop, the final one at Close)
	stop  chan struct{}
	done  chan struct{}
}

// Start runs the loop until Close.
func (r *Replicator) Start() {
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	r.known = map[string]bool{}
	go r.loop()
}

func (r *Replicator) loop() {
	defer close(r.done)
	tick := time.NewTicker(r.Interval)
	defer tick.Stop()
	r.Once(context.Background())
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			r.Once(context.Background())
		}
	}
}

// Once takes a snapshot if the store changed since the last one, then prunes; failures are logged
// and tried again at the next tick.
func (r *Replicator) Once(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Changed != nil {
		changed, err := r.Changed(ctx)
		if err != nil {
			r.Log.Warn("backup: checking for changes", "err", err)
		} else if !changed {
			return
		}
	}
	start := time.Now()
	m, err := Snapshot(ctx, r.Source, r.Target, r.TmpDir, r.Name, r.known)
	if err != nil {
		r.Log.Error("backup: snapshot FAILED; the next one tries again", "target", r.Target.String(), "err", err)
		return
	}
	r.Log.Info("backup: snapshot", "target", r.Target.String(), "key", m.Key, "bytes", m.Bytes, "pieces", len(m.Pieces),
		"ms", time.Since(start).Milliseconds())
	if r.Retention > 0 {
		if s, p, err := Prune(ctx, r.Target, time.Now().Add(-r.Retention), time.Hour); err != nil {
			r.Log.Warn("backup: prune", "err", err)
		} else if s+p > 0 {
			for k := range r.known {
				if strings.HasPrefix(k, "pieces/") {
					delete(r.known, k) // some may be gone: ask the target again
				}
			}
			r.Log.Info("backup: pruned", "snapshots", s, "pieces", p)
		}
	}
}

// Close stops the loop and takes a last snapshot (the store must still be open), bounded by ctx.
func (r *Replicator) Close(ctx context.Context) error {
	close(r.stop)
	<-r.done
	r.Once(ctx)
	if r.OnClose != nil {
		r.OnClose()
	}
	if ctx.Err() != nil {
		return fmt.Errorf("backup: last snapshot: %w", ctx.Err())
	}
	return nil
}
