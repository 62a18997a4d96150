package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/carryover/carryover/internal/doctor"
	"github.com/carryover/carryover/internal/sandboxtest"
	"github.com/carryover/carryover/kernel/sandbox"
)

// runDoctor runs `carryover doctor --json` in-process with args; its exit code and checks by name.
func runDoctor(t *testing.T, args ...string) (int, map[string]doctor.Check, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), append([]string{"doctor", "--data_dir", t.TempDir()}, args...), strings.NewReader(""), &out, &errb)
	var ans struct {
		Checks []doctor.Check `json:"checks"`
		Failed bool           `json:"failed"`
	}
	text := out.String()
	if len(args) > 0 && args[0] == "--json" {
		if err := json.Unmarshal(out.Bytes(), &ans); err != nil {
			t.Fatalf("doctor output: %v\n%s\nstderr: %s", err, text, errb.String())
		}
	}
	m := map[string]doctor.Check{}
	for _, c := range ans.Checks {
		m[c.Name] = c
	}
	return code, m, text
}

// On this machine (root, bubblewrap: what make test has) every prerequisite of the sandbox holds.
func TestDoctorPassesHere(t *testing.T) {
	t.Parallel()
	sandboxtest.Require(t, sandbox.Probe)
	code, checks, text := runDoctor(t, "--json")
	if code != 0 {
		t.Fatalf("doctor exited %d:\n%s", code, text)
	}
	for _, name := range []string{"root", "bubblewrap", "user namespaces", "network namespaces", "idmapped mounts", "cgroups",
		"seccomp", "userfaultfd + PAGEMAP_SCAN", "lazy restore", "/dev/shm", "disk space", "python + ipykernel"} {
		c, ok := checks[name]
		if !ok {
			t.Fatalf("no %q check in:\n%s", name, text)
		}
		if c.Status == doctor.Fail {
			t.Errorf("%s failed: %s", name, c.Detail)
		}
	}
	if checks["lazy restore"].Status != doctor.Pass {
		t.Errorf("lazy restore as root: %+v", checks["lazy restore"])
	}
	if !regexp.MustCompile(`version \d+\.\d+`).MatchString(checks["bubblewrap"].Detail) {
		t.Errorf("bubblewrap line names no version: %q", checks["bubblewrap"].Detail)
	}
	if checks["postgresql"].Status != doctor.Skip || checks["s3"].Status != doctor.Skip {
		t.Errorf("store checks on a sqlite config: %+v %+v", checks["postgresql"], checks["s3"])
	}
}

// A bogus sandbox.bwrap fails the bubblewrap line with its fix, and the exit code says so.
func TestDoctorFailsWithoutBwrap(t *testing.T) {
	t.Parallel()
	code, checks, text := runDoctor(t, "--json", "--sandbox.bwrap", "/nonexistent/bwrap")
	if code != 1 {
		t.Fatalf("doctor exited %d, want 1:\n%s", code, text)
	}
	bw := checks["bubblewrap"]
	if bw.Status != doctor.Fail || !strings.Contains(bw.Detail, "/nonexistent/bwrap") || !strings.Contains(bw.Fix, "apt-get install bubblewrap") {
		t.Fatalf("bubblewrap check: %+v", bw)
	}
	// The text form prints the failing line and its fix under it.
	code, _, text = runDoctor(t, "--sandbox.bwrap", "/nonexistent/bwrap")
	if code != 1 || !regexp.MustCompile(`(?m)^FAIL\s+bubblewrap\s+.*/nonexistent/bwrap.*\n\s+fix: apt-get install bubblewrap`).MatchString(text) {
		t.Fatalf("text report (exit %d):\n%s", code, text)
	}
}
