// Package sandboxtest decides whether a test that needs the real sandbox (bubblewrap as root) runs.
package sandboxtest

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// RequiredEnv, set to "1" (make test sets it), turns a missing sandbox into a failure: the sandbox
// suites are then never skipped without anybody noticing.
const RequiredEnv = "CARRYOVER_TEST_SANDBOX_REQUIRED"

// Require skips t where the sandbox cannot run: it needs root (per-box uids, idmapped mounts,
// cgroups) and a working bubblewrap (probe, kernel/sandbox.Probe). Under RequiredEnv it fails instead.
func Require(t testing.TB, probe func(string) error) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "the sandbox needs root (per-box uids, idmapped mounts, cgroups); make test runs as root"
	} else if err := probe(""); err != nil {
		why = "bubblewrap cannot run here: " + err.Error()
	}
	if why == "" {
		return
	}
	Missing(t, why)
}

// Missing skips t because a part of the sandbox it tests cannot run here (why says which), or
// fails it under RequiredEnv: a host that make test runs on must have that part too.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(RequiredEnv) == "1" {
		t.Fatalf("%s (%s=1 requires the sandbox suites to run)", why, RequiredEnv)
	}
	t.Skip(why)
}

// FillDisk writes a file at path until its file system is full (ENOSPC), leaving it full: the
// full-disk tests of the chaos harness and of the workspace disks.
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); errors.Is(err, syscall.ENOSPC) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}
