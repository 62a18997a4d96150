package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/persistence/sqlite"
)

// The durability section measures what store.sqlite_synchronous full costs a turn beside normal: two
// servers, one per setting, each running `x = 1` (a checkpoint and a session record: the commits
// full fsyncs) in one session, interleaved turn by turn so both see the same machine and disk. Full
// is the default: an answered turn survives a power cut (persistence/sqlite/powercut_test.go).

func benchDurability(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	srvs := map[string]*benchSrv{}
	defer func() {
		for _, h := range srvs {
			if _, serr := h.stop(); err == nil {
				err = serr
			}
		}
	}()
	for _, mode := range []string{"full", "normal"} {
		h, err := startBenchSrv(ctx, env, "durability-"+mode, func(c *configs.Config) { c.Store.SQLiteSynchronous = mode })
		if err != nil {
			return nil, err
		}
		srvs[mode] = h
		if _, err := h.c.CreateSession(ctx, client.CreateRequest{SessionID: "dur"}); err != nil {
			return nil, err
		}
		for range 3 { // warm: the kernel, the first checkpoint
			if _, err := h.c.Run(ctx, "dur", client.RunRequest{Code: "x = 1"}); err != nil {
				return nil, err
			}
		}
	}
	n := 60
	if env.Quick {
		n = 8
	}
	for _, turn := range []struct{ name, code string }{
		{"run `x = i`", "x = %d"},
		// A changed workspace file: with full the turn syncs the workspace before its checkpoint.
		{"run appending a line to a workspace file", "with open('log.txt', 'a') as f: f.write('%d\\n')"},
	} {
		took, err := durabilityTurns(ctx, srvs, turn.code, n)
		if err != nil {
			return nil, err
		}
		for _, p := range []float64{50, 99} {
			f, nm := percentile(took["full"], p), percentile(took["normal"], p)
			rows = append(rows, benchRow{Name: fmt.Sprintf("%s with sqlite_synchronous full (p%g)", turn.name, p),
				Ours: fmtDur(f), Peer: fmtDur(nm), Ratio: ratio(f, nm),
				Note: fmt.Sprintf("peer: normal, a second server on the same disk, interleaved, %d turns each", n)})
		}
	}
	commit, err := benchCommitCost(ctx, env, n*5)
	if err != nil {
		return nil, err
	}
	return append(rows, commit...), nil
}

// benchCommitCost times one commit alone (a session created) in a store of each mode on the same
// disk, interleaved: the fsync that full adds, without a turn around it.
func benchCommitCost(ctx context.Context, env *benchEnv, n int) ([]benchRow, error) {
	stores := map[sqlite.Synchronous]*sqlite.Store{}
	defer func() {
		for _, st := range stores {
			st.Close()
		}
	}()
	for _, mode := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		dir := filepath.Join(env.Scratch, "durability-commit-"+string(mode))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		st, err := sqlite.OpenWith(filepath.Join(dir, "carryover.db"), sqlite.Options{Synchronous: mode})
		if err != nil {
			return nil, err
		}
		stores[mode] = st
	}
	took := map[sqlite.Synchronous][]time.Duration{}
	for i := range n {
		for _, mode := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
			now := time.Now().UTC()
			start := time.Now()
			if err := stores[mode].CreateSession(ctx, carryover.SessionRecord{ID: fmt.Sprintf("s%d", i), State: "running",
				Doc: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now}); err != nil {
				return nil, err
			}
			took[mode] = append(took[mode], time.Since(start))
		}
	}
	f, nm := percentile(took[sqlite.SyncFull], 50), percentile(took[sqlite.SyncNormal], 50)
	return []benchRow{{Name: "one SQLite commit (a session created) with full (median)", Ours: fmtDur(f), Peer: fmtDur(nm),
		Ratio: ratio(f, nm), Note: fmt.Sprintf("peer: normal, a second store file on the same disk, interleaved, %d each", n)}}, nil
}

// durabilityTurns runs code (with %d for the turn's number) n times on each server, interleaved,
// the order alternating so neither always goes first, and returns each mode's turn times.
func durabilityTurns(ctx context.Context, srvs map[string]*benchSrv, code string, n int) (map[string][]time.Duration, error) {
	took := map[string][]time.Duration{}
	for i := range n {
		order := []string{"full", "normal"}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, mode := range order {
			start := time.Now()
			if _, err := srvs[mode].c.Run(ctx, "dur", client.RunRequest{Code: fmt.Sprintf(code, i)}); err != nil {
				return nil, fmt.Errorf("%s: %w", mode, err)
			}
			took[mode] = append(took[mode], time.Since(start))
		}
	}
	return took, nil
}
