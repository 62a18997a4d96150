package kernel

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestConnectionInfo(t *testing.T) {
	dir := t.TempDir()
	ipc, err := newConnectionInfo("ipc", dir, "python3")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range ipc.ports() {
		ep := ipc.endpoint(p)
		path := strings.TrimPrefix(ep, "ipc://")
		if len(path) >= 108 || !strings.HasPrefix(path, dir) || seen[ep] {
			t.Errorf("ipc endpoint %q", ep)
		}
		seen[ep] = true
	}
	tcp, err := newConnectionInfo("tcp", dir, "python3")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[int]bool{}
	for _, p := range tcp.ports() {
		if p <= 0 || ports[p] {
			t.Errorf("tcp ports %v", tcp.ports())
		}
		ports[p] = true
	}
	if tcp.IP != "127.0.0.1" || !strings.HasPrefix(tcp.endpoint(tcp.ShellPort), "tcp://127.0.0.1:") {
		t.Errorf("tcp endpoint %q", tcp.endpoint(tcp.ShellPort))
	}
	if ipc.Key == tcp.Key || len(ipc.Key) != 64 || ipc.SignatureScheme != "hmac-sha256" {
		t.Errorf("keys %q %q", ipc.Key, tcp.Key)
	}

	path := filepath.Join(dir, "c.json")
	if err := tcp.write(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("connection file mode %v, want 0600", fi.Mode().Perm())
	}
	var back ConnectionInfo
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &back); err != nil || back != tcp {
		t.Errorf("connection file round trip: %+v (%v)", back, err)
	}
}

func TestConnectionInfoLongSocketPath(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if _, err := newConnectionInfo("ipc", long, "python3"); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a socket path over 107 bytes was accepted: %v", err)
	}
	if _, err := newConnectionInfo("udp", t.TempDir(), "python3"); err == nil {
		t.Error("unknown transport accepted")
	}
}

func TestRuntimeDir(t *testing.T) {
	base := filepath.Join(t.TempDir(), "rt")
	a, err := makeRuntimeDir(base)
	if err != nil {
		t.Fatal(err)
	}
	b, err := makeRuntimeDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || filepath.Dir(a) != base {
		t.Errorf("runtime dirs %q %q", a, b)
	}
	for _, d := range []string{base, a} {
		fi, _ := os.Stat(d)
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
}

func TestSweepStaleRuntimeDirs(t *testing.T) {
	base := filepath.Join(t.TempDir(), "rt")
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	// A dead owner: a process that has exited (and been reaped).
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, owner string) string {
		d := filepath.Join(base, name)
		os.MkdirAll(d, 0o700)
		if owner != "" {
			os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o600)
		}
		return d
	}
	stale := mk("k111", strconv.Itoa(cmd.Process.Pid)+" 12345\n")
	reused := mk("k222", strconv.Itoa(os.Getpid())+" 1\n") // our pid, another start time: a reused pid
	live := mk("k333", selfOwner())
	noOwner := mk("k444", "")
	other := mk("notours", strconv.Itoa(cmd.Process.Pid)+" 1\n")
	d, err := makeRuntimeDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{stale: false, reused: false, live: true, noOwner: true, other: true, d: true} {
		_, err := os.Stat(dir)
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(dir), got, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(d, ownerFile)); string(b) != selfOwner() {
		t.Errorf("owner file %q", b)
	}
}

// TestFreePortsNeverRepeat: ports handed to one kernel are not handed to another started soon
// after (between the choice and the kernel's bind the port is free, and the OS may offer it again).
func TestFreePortsNeverRepeat(t *testing.T) {
	seen := map[int]bool{}
	for i := 0; i < 60; i++ {
		ps, err := freePorts(5)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("port %d handed out twice (call %d)", p, i)
			}
			seen[p] = true
		}
	}
}
