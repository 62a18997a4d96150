package backup_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/internal/servertest"
	"github.com/carryover/carryover/persistence/backup"
)

// The end-to-end tests of backups: a real server (the binary) runs turns in 10 sessions, each turn
// setting n = k and writing k into f.txt; a backup is taken meanwhile; a server started on the
// restored data dir must have every session at a turn between the last one answered before the
// backup began and the last one started before it ended: nothing committed before is lost, nothing
// after is there.

const token = "backup-test-token"

// turner runs turns in one session and remembers which were answered and which were started.
type turner struct {
	id       string
	started  atomic.Int64 // the k of the last turn sent
	answered atomic.Int64 // the k of the last turn answered with its checkpoint
}

func (tu *turner) turn(ctx context.Context, c *client.Client) error {
	k := tu.started.Load() + 1
	tu.started.Store(k)
	res, err := c.Run(ctx, tu.id, client.RunRequest{Code: fmt.Sprintf("n = %d\nopen('f.txt', 'w').write('%d')", k, k)})
	if err != nil {
		return fmt.Errorf("%s turn %d: %w", tu.id, k, err)
	}
	if res.Status != "ok" || res.Checkpoint == nil {
		return fmt.Errorf("%s turn %d: status %s, checkpoint %v (%s)", tu.id, k, res.Status, res.Checkpoint, res.CheckpointError)
	}
	tu.answered.Store(k)
	return nil
}

// mark is what every session had answered and started at one moment.
type mark struct{ answered, started []int64 }

func marks(ts []*turner) mark {
	var m mark
	for _, tu := range ts {
		m.answered = append(m.answered, tu.answered.Load())
		m.started = append(m.started, tu.started.Load())
	}
	return m
}

// load runs turns in every session until stop is closed; each session makes at least min turns.
func load(t *testing.T, c *client.Client, ts []*turner, min int64, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for _, tu := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					if tu.answered.Load() >= min {
						return
					}
				default:
				}
				if err := tu.turn(t.Context(), c); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	return wg.Wait
}

// newTurners creates n sessions and runs their first turn one after the other: n kernels starting
// at once on a loaded 2-core machine can miss kernel.startup_timeout_seconds.
func newTurners(t *testing.T, c *client.Client, n int) []*turner {
	ts := make([]*turner, n)
	for i := range ts {
		ts[i] = &turner{id: fmt.Sprintf("%s-%d", servertest.ID(t), i)}
		if _, err := c.CreateSession(t.Context(), client.CreateRequest{SessionID: ts[i].id}); err != nil {
			t.Fatal(err)
		}
		if err := ts[i].turn(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

// waitAnswered blocks until every session answered at least n turns.
func waitAnswered(t *testing.T, ts []*turner, n int64) {
	deadline := time.Now().Add(3 * time.Minute)
	for _, tu := range ts {
		for tu.answered.Load() < n {
			if t.Failed() {
				t.FailNow() // a turn failed: load reports it
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s answered %d turns, waiting for %d", tu.id, tu.answered.Load(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// carryover runs the binary with args and returns its output.
func carryover(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(servertest.MustBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("carryover %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkRestored starts a server on the restored dir and checks each session's n and f.txt against
// the bounds: at least what was answered at lo, at most what was started at hi.
func checkRestored(t *testing.T, dir string, ts []*turner, lo, hi mark) {
	t.Helper()
	p := servertest.StartProcess(t, servertest.Options{Token: token, Dir: dir, Flags: []string{"--pool.size", "1"},
		Env: []string{"CARRYOVER_SANDBOX_ENABLED=false"}})
	c := client.New(p.Base, token)
	for i, tu := range ts {
		res, err := c.Run(t.Context(), tu.id, client.RunRequest{Code: "print(n, open('f.txt').read())"})
		if err != nil || res.Status != "ok" {
			t.Fatalf("%s after restore: %v %+v", tu.id, err, res)
		}
		f := strings.Fields(res.Stdout)
		if len(f) != 2 || f[0] != f[1] {
			t.Fatalf("%s: n and f.txt disagree after restore: %q", tu.id, res.Stdout)
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		if n < lo.answered[i] || n > hi.started[i] {
			t.Errorf("%s restored at turn %d; want a turn between %d (answered before the backup) and %d (started before it ended)",
				tu.id, n, lo.answered[i], hi.started[i])
		}
	}
}

// An on-demand backup (the CLI, beside the running server) while 10 sessions run turns restores
// every turn answered before it began and none started after it ended; restore refuses a data dir
// that has a database.
func TestBackupWhileTurnsRun(t *testing.T) {
	t.Parallel()
	p := servertest.StartProcess(t, servertest.Options{Token: token, Flags: []string{"--pool.size", "1"},
		Env: []string{"CARRYOVER_SANDBOX_ENABLED=false"}})
	c := client.New(p.Base, token)
	ts := newTurners(t, c, 10)
	stop := make(chan struct{})
	wait := load(t, c, ts, 0, stop)
	waitAnswered(t, ts, 3)
	replica := filepath.Join(t.TempDir(), "replica")
	lo := marks(ts)
	carryover(t, nil, "backup", "--data_dir", filepath.Join(p.Dir, "data"), "--to", replica)
	hi := marks(ts)
	// Turns after the backup: the restore must not have them.
	for i, tu := range ts {
		waitAnswered(t, []*turner{tu}, hi.started[i]+2)
	}
	close(stop)
	wait()
	if t.Failed() {
		return
	}
	restored := t.TempDir()
	out := carryover(t, nil, "restore", "--from", replica, "--to", filepath.Join(restored, "data"))
	if !strings.Contains(out, "restored snapshots/") {
		t.Fatalf("restore said: %s", out)
	}
	cmd := exec.Command(servertest.MustBinary(t), "restore", "--from", replica, "--to", filepath.Join(restored, "data"))
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "already exists") {
		t.Fatalf("a second restore into the same data dir: %v %s", err, out)
	}
	checkRestored(t, restored, ts, lo, hi)
}

// The server's continuous replication to an S3 bucket (Versity Gateway) restores to a point in
// time: the store as of the last snapshot finished by then, here taken after the turns answered
// before that time, and before the turns that followed it.
func TestBackupPointInTimeFromS3(t *testing.T) {
	t.Parallel()
	gw, err := s3test.Start(t.TempDir())
	if err != nil {
		t.Fatalf("versitygw (make tools builds it; make test runs make tools first): %v", err)
	}
	t.Cleanup(gw.Stop)
	url := "s3://" + s3test.NewBucket() + "/replica"
	s3env := []string{"CARRYOVER_BACKUP_S3_ENDPOINT=" + gw.Endpoint, "CARRYOVER_BACKUP_S3_ACCESS_KEY=" + s3test.AccessKey,
		"CARRYOVER_BACKUP_S3_SECRET_KEY=" + s3test.SecretKey}
	p := servertest.StartProcess(t, servertest.Options{Token: token, Flags: []string{"--pool.size", "1"},
		Env: append([]string{"CARRYOVER_SANDBOX_ENABLED=false", "CARRYOVER_BACKUP_TO=" + url, "CARRYOVER_BACKUP_INTERVAL_SECONDS=0.3"}, s3env...)})
	c := client.New(p.Base, token)
	target, err := backup.Open(t.Context(), url, backup.S3Options{Endpoint: gw.Endpoint, AccessKey: s3test.AccessKey,
		SecretKey: s3test.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTurners(t, c, 5)
	// Phase 1: two more turns each, then quiet until a snapshot began after the last answer.
	turns(t, c, ts, 2)
	phase1 := marks(ts)
	waitSnapshotAfter(t, target, time.Now())
	at := time.Now().UTC()
	// Phase 2: two more turns, replicated too.
	turns(t, c, ts, 2)
	waitSnapshotAfter(t, target, time.Now())
	if t.Failed() {
		return
	}
	restored := t.TempDir()
	carryover(t, s3env, "restore", "--from", url, "--to-time", at.Format(time.RFC3339Nano), "--to", filepath.Join(restored, "data"))
	checkRestored(t, restored, ts, phase1, phase1)
}

// turns runs n turns in every session, the sessions in parallel.
func turns(t *testing.T, c *client.Client, ts []*turner, n int) {
	var wg sync.WaitGroup
	for _, tu := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if err := tu.turn(t.Context(), c); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// waitSnapshotAfter waits until the replica holds a snapshot that began after t0 (so it holds
// every commit before t0).
func waitSnapshotAfter(t *testing.T, target backup.Target, t0 time.Time) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ms, err := backup.List(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 && ms[len(ms)-1].Started.After(t0) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no snapshot begun after %s in %s", t0, target)
}
