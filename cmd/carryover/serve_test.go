package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/servertest"
)

// TestServeBinary runs the real binary: with no token configured it generates one and prints the UI
// URL with it (as Jupyter does), /api needs it, and SIGTERM exits 0.
func TestServeBinary(t *testing.T) {
	dir := t.TempDir()
	bin := servertest.MustBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--server.addr", "127.0.0.1:0", "--data_dir", filepath.Join(dir, "data"), "--pool.size", "1")
	cmd.Env = append(os.Environ(), "CARRYOVER_AUTH_TOKEN=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlRE := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=([0-9a-f]{32,})`)
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var m []string
	select {
	case m = <-found:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no URL with a token printed")
	}
	base := strings.SplitN(m[0], "/?", 2)[0]
	get := func(path, tok string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if c := get("/api/sessions", ""); c != 401 {
		t.Fatalf("no token: %d", c)
	}
	if c := get("/api/sessions", m[1]); c != 200 {
		t.Fatalf("printed token: %d", c)
	}
	if c := get("/", ""); c != 200 {
		t.Fatalf("UI: %d", c)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("SIGTERM exit: %v", err)
	}
}

// TestServeOnATakenAddressLeavesNothingBehind: a server that cannot listen exits non-zero saying
// why, and what it had started (the warm pool's kernels, their sandboxes' mounts under data_dir) is
// stopped: no mount under its data_dir, no process of its own left.
func TestServeOnATakenAddressLeavesNothingBehind(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	data := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, servertest.MustBinary(t), "serve", "--server.addr", taken.Addr().String(),
		"--data_dir", data, "--pool.size", "2")
	cmd.Env = append(os.Environ(), "CARRYOVER_AUTH_TOKEN=tok")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "address already in use") {
		t.Fatalf("serve on a taken address: err %v, output:\n%s", err, out)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], data) {
			t.Errorf("left mounted: %s", f[4])
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), data) {
			t.Errorf("left running: %s", strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}
