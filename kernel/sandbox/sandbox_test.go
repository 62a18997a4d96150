package sandbox

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/sandboxtest"
)

// newManager returns a live Manager, or skips where bubblewrap cannot run (not root, no bwrap).
func newManager(t *testing.T, tweak ...func(*Config)) *Manager {
	t.Helper()
	sandboxtest.Require(t, Probe)
	cfg := Config{StateDir: filepath.Join(t.TempDir(), "state"), UIDBase: 230000, UIDCount: 100}
	for _, f := range tweak {
		f(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func runBox(t *testing.T, b *Box, script string) (string, int) {
	t.Helper()
	argv := b.Command(Command{Argv: []string{"/bin/sh", "-c", script}, Env: map[string]string{"HOME": "/tmp"}})
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// TestBoxIsolation runs shell commands in a box with a workspace attached before the start.
func TestBoxIsolation(t *testing.T) {
	m := newManager(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	_ = os.WriteFile(secret, []byte("s3cret"), 0o644)
	b, err := m.NewBox(BoxOptions{Name: "x1", Limits: Limits{Pids: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if err := b.Attach(ws); err != nil {
		t.Fatal(err)
	}
	out, code := runBox(t, b, `id -u; cat /workspace/mine.txt; echo; echo new > /workspace/new.txt && echo wrote;
		cat `+secret+` 2>/dev/null || echo nosecret; cat /etc/shadow 2>/dev/null || echo noshadow;
		ls /dev; (: </dev/tty) 2>/dev/null && echo tty-opened || echo no-controlling-tty; grep CapEff /proc/self/status; echo pid=$$; (echo > /dev/tcp/127.0.0.1/22) 2>/dev/null; 
		python3 -c 'import socket; socket.create_connection(("1.1.1.1", 53), timeout=1)' 2>&1 | tail -1`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{strconv.Itoa(b.UID()), "hello", "wrote", "nosecret", "noshadow", "no-controlling-tty", "CapEff:\t0000000000000000", "pid=2", "Network is unreachable"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	checkBoxEtc(t, b)
	// The box's own /dev has a tty node (bubblewrap --dev), but with no controlling terminal
	// (--new-session) it cannot be opened, so no TIOCSTI reaches the server's terminal.
	if strings.Contains(out, "tty-opened") {
		t.Errorf("/dev/tty opens inside the box:\n%s", out)
	}
	// Files made inside belong to root on disk (idmapped) or to the box uid (chowned).
	fi, err := os.Stat(filepath.Join(ws, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idmapped=%v info=%+v new.txt uid=%d", m.IDMapped(), m.Info(), statUID(fi))
}

// checkBoxEtc: the box's /etc is the allowlist (its entries as the host has them) with the box's
// own passwd and group, read-only, bound as one tree.
func checkBoxEtc(t *testing.T, b *Box) {
	t.Helper()
	want := map[string]bool{"passwd": true, "group": true}
	for _, e := range DefaultEtc {
		if _, err := os.Stat("/etc/" + e); err == nil {
			want[strings.SplitN(e, "/", 2)[0]] = true
		}
	}
	wantList := slices.Sorted(maps.Keys(want))
	out, code := runBox(t, b, `echo "etc: $(ls -A /etc | sort | tr '\n' ' ')"; touch /etc/x 2>/dev/null && echo etc-writable || echo etc-read-only;
		cat /etc/hosts; echo "certs: $(ls /etc/ssl/certs | wc -l)"; grep -c "^sandbox:" /etc/passwd;
		echo "mounts under /etc: $(awk '$5 ~ "^/etc/" {print $5}' /proc/self/mountinfo | sort | tr '\n' ' ')"`)
	host, _ := os.ReadFile("/etc/hosts")
	certs, _ := os.ReadDir("/etc/ssl/certs")
	for _, w := range []string{"etc: " + strings.Join(wantList, " ") + " \n", "etc-read-only", string(host), fmt.Sprintf("certs: %d\n", len(certs)),
		"mounts under /etc: /etc/group /etc/passwd \n"} { // /etc is one bind (etc.go), but for the box's own two
		if !strings.Contains(out, w) {
			t.Errorf("the box's /etc: output lacks %q (exit %d):\n%s", w, code, out)
		}
	}
}

// TestAttachPropagates attaches a workspace to a box whose process is already running: the warm
// pool's claim path.
func TestAttachPropagates(t *testing.T) {
	m := newManager(t)
	ws := t.TempDir()
	_ = os.WriteFile(filepath.Join(ws, "f"), []byte("late"), 0o644)
	b, err := m.NewBox(BoxOptions{Name: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	argv := b.Command(Command{Argv: []string{"/bin/sh", "-c", `while [ ! -e /workspace/f ]; do sleep 0.01; done; cat /workspace/f; echo x > /workspace/g`}})
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := b.Attach(ws); err != nil {
		t.Fatal(err)
	}
	t.Logf("attach took %v", time.Since(start))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "late") {
			t.Fatalf("err %v, output %q", err, out.String())
		}
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the attached workspace never appeared inside")
	}
	if _, err := os.Stat(filepath.Join(ws, "g")); err != nil {
		t.Fatal(err)
	}
}

func TestLimits(t *testing.T) {
	m := newManager(t)
	if m.cg == nil {
		sandboxtest.Missing(t, "no cgroups here: the limits are cgroup limits")
	}
	b, err := m.NewBox(BoxOptions{Name: "lim", Limits: Limits{MemoryBytes: 64 << 20, Pids: 32}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	// read once before the hits: the counters are then read again through the files held open
	if ev := b.Events(); ev != (Events{}) {
		t.Fatalf("a new box counts limit hits: %+v", ev)
	}
	out, code := runBox(t, b, `python3 -c 'x = bytearray(200 << 20); x[::4096] = b"x" * len(x[::4096]); print("survived")'`)
	if strings.Contains(out, "survived") {
		t.Fatalf("a 200 MiB allocation survived a 64 MiB limit (exit %d): %s", code, out)
	}
	if ev := b.Events(); ev.OOMKills == 0 {
		t.Errorf("no OOM kill counted: %+v (exit %d, %s)", ev, code, out)
	}
	out, _ = runBox(t, b, `for i in $(seq 100); do sleep 0.3 & done 2>&1 | tail -1; echo done`)
	if ev := b.Events(); ev.PidsMax == 0 {
		t.Errorf("no fork refusal counted: %+v: %s", ev, out)
	}
	b.Kill()
	if p := b.processes(); len(p) != 0 {
		t.Errorf("processes left after Kill: %v", p)
	}
}

func statUID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// TestUIDsExclusiveAcrossManagers: two servers with the same uid range never share a uid (a uid is
// how a box's leftovers are found and killed).
func TestUIDsExclusiveAcrossManagers(t *testing.T) {
	m1 := newManager(t)
	m2 := newManager(t)
	seen := map[int]string{}
	for i := 0; i < 5; i++ {
		for j, m := range []*Manager{m1, m2} {
			b, err := m.NewBox(BoxOptions{Name: "u" + strconv.Itoa(i)})
			if err != nil {
				t.Fatal(err)
			}
			if who, dup := seen[b.UID()]; dup {
				t.Fatalf("uid %d handed out twice (%s and m%d)", b.UID(), who, j+1)
			}
			seen[b.UID()] = "m" + strconv.Itoa(j+1)
		}
	}
}
