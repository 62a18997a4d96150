// Package servertest starts carryover servers for tests, the one way every package does it: the
// real binary as a process (Binary, Launch, StartProcess: for clients outside Go, kill -9 and
// restarts) or the server in the test's own process (Config, New, Start: for tests that tweak the
// config or look inside). It also has the small helpers such tests share (SyncBuffer, FreeAddr, ID).
package servertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// BinEnv names a carryover binary to test instead of building ./cmd/carryover (e.g. to keep testing
// clients while the server's packages do not build).
const BinEnv = "CARRYOVER_TEST_BIN"

var binary, raceBinary struct {
	once sync.Once
	path string
	err  error
}

// Binary is the carryover binary the tests run: $CARRYOVER_TEST_BIN, or ./cmd/carryover of this
// checkout built once per `go test` run. Every test package of a run calls it, several at the same
// time (go test -p), so the build goes to one path per checkout in the user's cache directory under
// an flock: the first package builds (or finds the binary up to date: `go build -o` relinks only
// when an input changed), the others wait for it and then find it up to date in a fraction of a
// second. Within a package the answer is remembered.
func Binary() (string, error) {
	binary.once.Do(func() { binary.path, binary.err = build(false) })
	return binary.path, binary.err
}

// RaceBinary is Binary built with the race detector (its own path in the same cache; a
// CARRYOVER_TEST_BIN is taken as it is): for processes whose server code ran inside a race-enabled
// test binary before (the cluster tests' nodes), so it stays under the detector.
func RaceBinary() (string, error) {
	raceBinary.once.Do(func() { raceBinary.path, raceBinary.err = build(true) })
	return raceBinary.path, raceBinary.err
}

// MustBinary is Binary for a test: it fails t when there is no binary.
func MustBinary(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func build(race bool) (string, error) {
	if bin := os.Getenv(BinEnv); bin != "" {
		return bin, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	// One directory per checkout: worktrees of other branches on the same machine build their own.
	dir := filepath.Join(cache, "carryover-test", fmt.Sprintf("%x", fnv64(root)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close() // drops the flock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("servertest: locking %s: %w", lock.Name(), err)
	}
	bin, args := filepath.Join(dir, "carryover"), []string{"build"}
	if race {
		bin, args = bin+"-race", append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "-o", bin, "./cmd/carryover")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("servertest: go build ./cmd/carryover: %v\n%s", err, out)
	}
	return bin, nil
}

// ModuleRoot is the directory of carryover's go.mod, found upwards from the working directory (go
// test runs each package in its own directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("servertest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// fnv64 is the FNV-1a hash of s: a short, stable directory name for a checkout's path.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
