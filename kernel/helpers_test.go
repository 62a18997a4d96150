package kernel

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// leakCanary is set in the test process environment; a kernel must never see it.
const leakCanary = "CARRYOVER_TEST_LEAK_CANARY"

func TestMain(m *testing.M) {
	os.Setenv(leakCanary, "leaked")
	os.Exit(m.Run())
}

// testLogger keeps kernel logs quiet unless -v.
func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testOptions(t *testing.T, transport string) Options {
	return Options{
		Transport:      transport,
		RuntimeDir:     shortTempDir(t),
		StartupTimeout: 60 * time.Second, // 2 shared cores, -race, other engineers' tests
		ShutdownGrace:  2 * time.Second,
		Env:            map[string]string{"CARRYOVER_TEST_ENV": "passed"},
		Logger:         testLogger(t),
	}
}

// shortTempDir is a temp dir with a short path: t.TempDir() paths include the test name and can
// push ipc socket paths past 107 bytes.
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "cot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startKernel starts a kernel that is shut down when the test ends.
func startKernel(t *testing.T, opts Options) *Kernel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	k, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := k.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return k
}

// run executes code and collects outputs and statuses.
type runResult struct {
	res      *ExecResult
	err      error
	outputs  []Output
	statuses []string
}

func (r *runResult) text(typ string) string {
	var b strings.Builder
	for _, o := range r.outputs {
		if o.Type == typ || (typ == "" && o.Type == "stream") {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

func (r *runResult) find(typ string) *Output {
	for i := range r.outputs {
		if r.outputs[i].Type == typ {
			return &r.outputs[i]
		}
	}
	return nil
}

func run(t *testing.T, k *Kernel, code string, opts ExecOptions) *runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &runResult{}
	var mu sync.Mutex // OnOutput is called from one goroutine; the mutex only satisfies -race for the reads below
	userOut, userStatus := opts.OnOutput, opts.OnStatus
	opts.OnOutput = func(o Output) {
		mu.Lock()
		r.outputs = append(r.outputs, o)
		mu.Unlock()
		if userOut != nil {
			userOut(o)
		}
	}
	opts.OnStatus = func(s string) {
		mu.Lock()
		r.statuses = append(r.statuses, s)
		mu.Unlock()
		if userStatus != nil {
			userStatus(s)
		}
	}
	r.res, r.err = k.Execute(ctx, code, opts)
	return r
}

// mustRun is run that fails the test on an error or a non-ok status.
func mustRun(t *testing.T, k *Kernel, code string) *runResult {
	t.Helper()
	r := run(t, k, code, ExecOptions{})
	if r.err != nil {
		t.Fatalf("Execute(%q): %v", code, r.err)
	}
	if r.res.Status != "ok" {
		t.Fatalf("Execute(%q): status %s %s: %s", code, r.res.Status, r.res.EName, r.res.EValue)
	}
	return r
}

// plain returns the text/plain of an execute_result.
func plain(t *testing.T, r *runResult) string {
	t.Helper()
	o := r.find("execute_result")
	if o == nil {
		t.Fatalf("no execute_result in %+v", r.outputs)
	}
	s, err := strconv.Unquote(string(o.Data["text/plain"]))
	if err != nil {
		t.Fatalf("text/plain %s: %v", o.Data["text/plain"], err)
	}
	return s
}

// processExists reports whether pid exists (and is not a zombie).
func processExists(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// groupMembers lists live pids whose process group is pgid.
func groupMembers(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := readStat(pid)
		if err == nil && s.pgrp == pgid && processExists(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// eventually polls cond until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
