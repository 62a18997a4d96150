package persistence_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover/kernel"
)

// TestSnapshotRidesOnTheCell: a checkpoint whose snapshot was taken as a user expression of the
// cell's own execute_request commits like a separate one; when the cell raises (no user
// expressions) or the answer is unusable, Finish takes the snapshot itself.
func TestSnapshotRidesOnTheCell(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := newCheckpointer(t, filepath.Join(dir, "db.sqlite"))
	mustSession(t, c, "ride")
	k := startKernel(t, dir)
	spool := filepath.Join(dir, "spool")
	if err := c.Install(ctx, k, spool, spool); err != nil {
		t.Fatal(err)
	}
	cell := func(code string) (status, answer string) {
		p, err := c.Prepare(ctx, "ride")
		if err != nil {
			t.Fatal(err)
		}
		res, err := k.Execute(ctx, code, kernel.ExecOptions{UserExpressions: map[string]string{"snap": p.Expr}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == "ok" {
			if answer, err = kernel.UserExpressionText(res.UserExpressions["snap"]); err != nil {
				t.Fatalf("ride: %v", err)
			}
		}
		if answer == "" && res.Status == "ok" {
			t.Fatal("no snapshot answer on a cell that succeeded")
		}
		cp, err := c.Finish(ctx, k, p, 1, "", answer)
		if err != nil {
			t.Fatalf("finish: %v", err)
		}
		if cp.ID == "" || len(cp.Saved) == 0 {
			t.Fatalf("nothing saved: %+v", cp)
		}
		if answer != "" {
			// The committed checkpoint is the one the ride took (a fallback would use a new token).
			var a struct{ Token string }
			if err := json.Unmarshal([]byte(answer), &a); err != nil || a.Token != cp.ID {
				t.Fatalf("ride answer token %q, checkpoint %s", a.Token, cp.ID)
			}
		}
		return res.Status, answer
	}
	if st, _ := cell("a = [1, 2]\nb = a"); st != "ok" {
		t.Fatal(st)
	}
	if st, ans := cell("c = 3\nraise ValueError('boom')"); st != "error" || ans != "" {
		t.Fatalf("status %s answer %q", st, ans)
	}
	// A garbled answer falls back to a separate snapshot under a new token.
	p, _ := c.Prepare(ctx, "ride")
	run(t, k, "d = 4")
	if _, err := c.Finish(ctx, k, p, 3, "", "{not json"); err != nil {
		t.Fatalf("fallback: %v", err)
	}
	killKernel(t, k)
	k2 := startKernel(t, dir)
	if err := c.Install(ctx, k2, spool, spool); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restore(ctx, k2, "ride", "", "", false); err != nil {
		t.Fatal(err)
	}
	if got := eval(t, k2, "(a, b is a, c, d)"); got != "([1, 2], True, 3, 4)" {
		t.Fatalf("restored %s", got)
	}
}
