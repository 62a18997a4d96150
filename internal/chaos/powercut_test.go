package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/sandboxtest"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/powercut"
	"github.com/carryover/carryover/internal/servertest"
)

// turnCode is one answered turn of the power-cut session: a counter, a list and a workspace file
// that each grow by one, so the state after a restore says which turn it is from.
const turnCode = "n = globals().get('n', 0) + 1\nlog = globals().get('log', []) + [n]\n" +
	"with open('turns.txt', 'a') as f: f.write(f'{n}\\n')\nprint(n)"

// checkCode prints the three views of the session's position: n, len(log) and the file's lines.
// (0 0 0 before the first turn).
const checkCode = "import os\nprint(globals().get('n', 0), len(globals().get('log', [])), " +
	"sum(1 for _ in open('turns.txt')) if os.path.exists('turns.txt') else 0)"

// TestPowerCutTurns cuts the power of the data dir's disk (internal/powercut: ext4 on a disk with a
// volatile cache) under a client running turns, at moments from a seed, with the server's default
// store.sqlite_synchronous (full). After each cut the server is killed -9 (as the power cut would),
// the disk mounted again (ext4 replays its journal) and the server started on it: the session must
// be at the last answered turn, or the one in flight at the cut, in its variables and its file. Any
// earlier state is an answered turn lost. CARRYOVER_POWERCUT_ROUNDS sets the cuts (make chaos: 100).
func TestPowerCutTurns(t *testing.T) {
	if why := powercut.Available(); why != "" {
		sandboxtest.Missing(t, why)
	}
	t.Parallel()
	rounds := envInt("CARRYOVER_POWERCUT_ROUNDS", 2)
	seed := uint64(envInt("CARRYOVER_CHAOS_SEED", 1))
	t.Logf("seed %d, %d cuts", seed, rounds)
	if lost := powerCutTurns(t, "full", seed, rounds); lost > 0 {
		t.Fatalf("store.sqlite_synchronous full: %d answered turns lost over %d cuts", lost, rounds)
	}
}

// TestPowerCutTurnsNormal is TestPowerCutTurns with store.sqlite_synchronous normal, for the record
// (make chaos): it counts the answered turns lost instead of failing on them, as normal allows.
func TestPowerCutTurnsNormal(t *testing.T) {
	rounds := envInt("CARRYOVER_POWERCUT_NORMAL", 0) // the number of cuts
	if rounds == 0 {
		t.Skip("make chaos runs it (CARRYOVER_POWERCUT_NORMAL=<cuts>): it measures, it asserts no promise")
	}
	if why := powercut.Available(); why != "" {
		t.Skip(why)
	}
	seed := uint64(envInt("CARRYOVER_CHAOS_SEED", 1))
	lost := powerCutTurns(t, "normal", seed, rounds)
	t.Logf("store.sqlite_synchronous normal: %d answered turns lost over %d cuts (seed %d)", lost, rounds, seed)
}

// powerCutTurns runs the cuts on one disk and server and returns the answered turns lost.
func powerCutTurns(t *testing.T, sync string, seed uint64, rounds int) (lost int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	d, err := powercut.New(t.TempDir(), 512<<20, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.Trace = t.Logf // a device held after a cut is named here (internal/powercut: detached lazily)
	p := servertest.StartProcess(t, servertest.Options{Token: "powercut", Dir: d.Dir,
		Flags: []string{"--pool.size", "1"}, Env: []string{"CARRYOVER_SANDBOX_ENABLED=false",
			"CARRYOVER_STORE_SQLITE_SYNCHRONOUS=" + sync}})
	c := client.New(p.Base, p.Token, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if _, err := c.CreateSession(t.Context(), client.CreateRequest{SessionID: "pc"}); err != nil {
		t.Fatal(err)
	}
	answered := 0
	for round := range rounds {
		n, before := powerCutRound(t, c, p, d, rng, sync, round, answered)
		if n < before {
			lost += before - n
		}
		answered = n
	}
	return lost
}

// powerCutRound runs turns until a cut at a random moment, brings the server back on the disk and
// checks the session against the last answered turn, returning the session's turn after the cut and
// the last one answered before it (an earlier turn after the cut: answered turns lost).
func powerCutRound(t *testing.T, c *client.Client, p *servertest.Process, d *powercut.Disk, rng *rand.Rand, sync string, round, answered int) (n, before int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var last atomic.Int64
	last.Store(int64(answered))
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			res, err := c.Run(ctx, "pc", client.RunRequest{Code: turnCode})
			if err != nil {
				done <- nil // the cut (or the kill after it) ended the turn: it was never answered
				return
			}
			if res.Status != "ok" || res.CheckpointError != "" || res.RecordError != "" {
				done <- fmt.Errorf("turn: status %s, checkpoint error %q, record error %q, %+v", res.Status, res.CheckpointError, res.RecordError, res.Error)
				return
			}
			n, err := strconv.Atoi(trimNL(res.Stdout))
			if err != nil {
				done <- fmt.Errorf("turn printed %q", res.Stdout)
				return
			}
			last.Store(int64(n))
		}
		done <- nil
	}()
	// Let a random number of turns be answered (0-4) first, then cut at a random moment of the next.
	for want, deadline := answered+rng.IntN(5), time.Now().Add(60*time.Second); int(last.Load()) < want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
	t0 := time.Now()
	before = int(last.Load()) // answered before the cut; a turn answered after it is not counted
	if _, err := d.Cut(); err != nil {
		t.Fatal(err)
	}
	p.Kill9()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	if err := d.Unmount(); err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	if err := d.Mount(); err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	t1 := time.Now()
	p.Restart(t)
	t2 := time.Now()
	// The check rides out a loaded machine's 429 (a kernel slow to start) as a user's client would.
	patient := client.New(p.Base, p.Token, client.WithRetry(client.RetryPolicy{MaxAttempts: 100, MaxElapsed: 5 * time.Minute,
		BaseDelay: time.Second, MaxDelay: 10 * time.Second}))
	res, err := patient.Run(t.Context(), "pc", client.RunRequest{Code: checkCode})
	if err != nil || res.Status != "ok" {
		t.Fatalf("round %d: the check after the cut: %v %+v", round, err, res)
	}
	var l, f int
	if _, err := fmt.Sscan(res.Stdout, &n, &l, &f); err != nil {
		t.Fatalf("round %d: the check printed %q", round, res.Stdout)
	}
	switch {
	case n < before:
		t.Logf("round %d: answered turns lost: the session is at turn %d, %d was answered before the cut", round, n, before)
	case n > before+1:
		t.Fatalf("round %d: the session is at turn %d, only %d were answered (+1 in flight)", round, n, before)
	case l != n:
		t.Fatalf("round %d: the session's variables disagree: n=%d, len(log)=%d", round, n, l)
	case f == n:
	case res.Restore == nil || !slices.Contains(res.Restore.FilesAhead, "turns.txt"):
		// The workspace is live: a turn never answered may have written to the file before the cut
		// (a whole line, or a torn one: ext4 may keep a new size over bytes never written), which the
		// restore must name (files_ahead).
		t.Fatalf("round %d: turns.txt has %d lines, the variables say turn %d, and the restore report does not name it: %+v",
			round, f, n, res.Restore)
	case f < n && sync == "full":
		t.Fatalf("round %d: with full the workspace fell behind the checkpoint: turns.txt has %d lines at turn %d", round, f, n)
	default:
		// Named: as a user told of it would, the test puts the file back at turn n.
		t.Logf("round %d: turns.txt has %d lines at turn %d, named in files_ahead; rewritten", round, f, n)
		fix := fmt.Sprintf("with open('turns.txt', 'w') as f: f.write(''.join(f'{i}\\n' for i in range(1, %d)))", n+1)
		if res, err := patient.Run(t.Context(), "pc", client.RunRequest{Code: fix}); err != nil || res.Status != "ok" {
			t.Fatalf("round %d: rewriting turns.txt: %v %+v", round, err, res)
		}
	}
	t.Logf("round %d: %d answered before the cut, the session came back at %d (cut+unmount+mount %v, restart %v, first turn %v)",
		round, before, n, t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
	return n, before
}

func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// envInt reads a positive integer from the environment, def when unset or not one.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
