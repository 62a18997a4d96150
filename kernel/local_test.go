package kernel

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLocalCommand starts, signals, kills and measures plain processes through the local provisioner.
func TestLocalCommand(t *testing.T) {
	lp := &LocalProvisioner{}
	ws := t.TempDir()
	var out bytes.Buffer
	p, err := lp.Command(context.Background(), CommandSpec{
		Argv: []string{"/bin/sh", "-c", `echo "$HOME $GREETING $(pwd)"; exit 3`}, Dir: ws, Workspace: ws,
		Env: map[string]string{"GREETING": "hi"}, Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if st := p.ExitStatus(); st.Code != 3 || st.Signal != 0 {
		t.Errorf("exit status %+v, want code 3", st)
	}
	if got, want := strings.TrimSpace(out.String()), ws+" hi "+ws; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if err := p.Cleanup(); err != nil {
		t.Error(err)
	}

	// A process group: the child and the grandchild get the signal; Kill takes both.
	p, err = lp.Command(context.Background(), CommandSpec{Argv: []string{"/bin/sh", "-c", "sleep 60 & sleep 61; wait"}, Dir: ws, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if !eventually(5*time.Second, func() bool { return len(groupMembers(p.PID())) == 3 }) {
		t.Fatalf("group members %v", groupMembers(p.PID()))
	}
	st, err := p.Stats()
	if err != nil || st.RSSBytes <= 0 {
		t.Errorf("stats %+v, %v", st, err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Error(err)
	}
	p.Kill()
	select {
	case <-p.Exited():
	default:
		t.Fatal("Kill returned before the reap")
	}
	if st := p.ExitStatus(); st.Signal != syscall.SIGKILL || st.Code != -1 {
		t.Errorf("exit status %+v, want SIGKILL", st)
	}
	if !eventually(5*time.Second, func() bool { return len(groupMembers(p.PID())) == 0 }) {
		t.Errorf("left behind: %v", groupMembers(p.PID()))
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("signal to a gone group: %v", err)
	}

	_, err = lp.Command(context.Background(), CommandSpec{Argv: []string{"/no/such/binary"}, Dir: ws})
	if _, ok := err.(*StartError); !ok {
		t.Errorf("missing binary: %T %v, want *StartError", err, err)
	}
}

// TestLocalKernelProcess checks what a kernel's local process tells its user: host paths, a spool dir
// of its own that Shutdown removes, signal interrupts, stats.
func TestLocalKernelProcess(t *testing.T) {
	opts := testOptions(t, "ipc")
	spool := t.TempDir()
	opts.Provisioner = &LocalProvisioner{SpoolRoot: spool}
	k := startKernel(t, opts)
	p := k.Process()
	if p.PID() != k.PID() {
		t.Errorf("process pid %d, kernel pid %d", p.PID(), k.PID())
	}
	host, inside := p.Spool()
	if host != inside || filepath.Dir(host) != spool || filepath.Base(host) != filepath.Base(k.RuntimeDir()) {
		t.Errorf("spool %q %q under %s", host, inside, spool)
	}
	if err := os.MkdirAll(host, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.AttachWorkspace(t.TempDir()); err != nil {
		t.Error(err)
	}
	if got := p.KernelPath("/some/host/dir"); got != "/some/host/dir" {
		t.Errorf("KernelPath = %q", got)
	}
	if err := p.SetLimits(Limits{CPUs: "nonsense"}); err != nil {
		t.Errorf("SetLimits: %v (a local process enforces none)", err)
	}
	if p.InterruptByMessage() {
		t.Error("a local kernel is interrupted by SIGINT")
	}
	if st, err := p.Stats(); err != nil || st.RSSBytes < 10<<20 || st.CPUSeconds <= 0 {
		t.Errorf("stats %+v, %v", st, err)
	}
	if err := k.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(host); !os.IsNotExist(err) {
		t.Errorf("spool %s left behind: %v", host, err)
	}
	if processExists(p.PID()) {
		t.Errorf("pid %d alive after Shutdown", p.PID())
	}
}
