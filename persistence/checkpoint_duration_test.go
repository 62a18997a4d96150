package persistence_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover/kernel"
)

// TestDurationIsTheCheckpointsOwn: duration_ms counts the checkpoint's work, never the cell's. A cell
// that sleeps 1 s and then raises (ipykernel skips the user expression, so Finish asks the agent in a
// call of its own) reports well under the sleep, as the same cell does when it succeeds (the
// snapshot rode on it). Finish used to time from Prepare on the raising path: ~1,230 ms.
func TestDurationIsTheCheckpointsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	c := newCheckpointer(t, filepath.Join(dir, "db.sqlite"))
	mustSession(t, c, "dur")
	k := startKernel(t, dir)
	spool := filepath.Join(dir, "spool")
	if err := c.Install(ctx, k, spool, spool); err != nil {
		t.Fatal(err)
	}
	const sleepMS = 1000
	for i, tc := range []struct{ code, status string }{
		{"import time\nx = 1\ntime.sleep(1)", "ok"},
		{"y = 2\ntime.sleep(1)\n1/0", "error"},
	} {
		p, err := c.Prepare(ctx, "dur")
		if err != nil {
			t.Fatal(err)
		}
		res, err := k.Execute(ctx, tc.code, kernel.ExecOptions{UserExpressions: map[string]string{"snap": p.Expr}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != tc.status {
			t.Fatalf("cell %d: status %s, want %s", i, res.Status, tc.status)
		}
		answer := ""
		if res.Status == "ok" {
			if answer, err = kernel.UserExpressionText(res.UserExpressions["snap"]); err != nil {
				t.Fatal(err)
			}
		}
		cp, err := c.Finish(ctx, k, p, i+1, "", answer)
		if err != nil {
			t.Fatal(err)
		}
		if len(cp.Saved) == 0 {
			t.Fatalf("cell %d saved nothing: %+v", i, cp)
		}
		if cp.DurationMS <= 0 || cp.DurationMS >= sleepMS {
			t.Fatalf("cell %d (%s): checkpoint duration %.1f ms, want the checkpoint's own work (> 0, < the cell's %d ms sleep)",
				i, tc.status, cp.DurationMS, sleepMS)
		}
	}
}
