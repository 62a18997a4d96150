package doctor

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A report fails on a FAIL only; its text puts each fix under its line and ends with the counts.
func TestReport(t *testing.T) {
	t.Parallel()
	r := Report{
		{Name: "root", Status: Pass, Detail: "uid 0"},
		{Name: "cgroups", Status: Warn, Detail: "no cpu", Fix: "delegate cpu"},
		{Name: "s3", Status: Skip, Detail: "no bucket"},
	}
	if r.Failed() {
		t.Fatal("a report with a warning failed")
	}
	r = append(r, Check{Name: "bubblewrap", Status: Fail, Detail: "not found", Fix: "apt-get install bubblewrap"})
	if !r.Failed() {
		t.Fatal("a report with a failure did not fail")
	}
	var b bytes.Buffer
	r.Print(&b)
	out := b.String()
	for _, w := range []string{"WARN  cgroups     no cpu\n", "fix: delegate cpu\n", "FAIL  bubblewrap  not found\n",
		"fix: apt-get install bubblewrap\n", "1 passed, 1 warned, 1 failed, 1 skipped (warn:cgroups, fail:bubblewrap)\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("report text lacks %q:\n%s", w, out)
		}
	}
	if strings.Count(out, "fix:") != 2 {
		t.Errorf("a skipped line got a fix:\n%s", out)
	}
}

// With the sandbox off its checks are skipped, not failed.
func TestSandboxOffSkips(t *testing.T) {
	t.Parallel()
	r := Run(context.Background(), Options{DataDir: t.TempDir(), SkipPython: true, SkipReachable: true})
	for _, c := range r {
		if c.Name == "root" || c.Name == "bubblewrap" || c.Name == "seccomp" {
			if c.Status != Skip {
				t.Errorf("%s with the sandbox off: %s", c.Name, c.Status)
			}
		}
	}
	if r.Failed() {
		var b bytes.Buffer
		r.Print(&b)
		t.Fatalf("failed with the sandbox off:\n%s", b.String())
	}
}
