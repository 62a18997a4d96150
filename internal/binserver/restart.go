package binserver

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Restartable is a carryover binary that a test can kill -9 and start again on the same address
// and data dir, as a crash and a supervisor's restart would: clients that reconnect to the same
// URL find the new process.
type Restartable struct {
	Server
	bin    string
	args   []string
	env    []string
	dir    string
	cmd    *exec.Cmd
	exited chan error
}

// StartRestartable is Start for a server the test will Kill9 and Restart.
func StartRestartable(t testing.TB, root, token string, flags, env []string) *Restartable {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "carryover")
	build := exec.Command("go", "build", "-o", bin, "./cmd/carryover")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/carryover: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := &Restartable{Server: Server{Base: "http://" + addr, Token: token}, bin: bin, env: env, dir: tmp,
		args: append([]string{"serve", "--server.addr", addr, "--data_dir", filepath.Join(tmp, "data"), "--auth.token", token}, flags...)}
	t.Cleanup(func() {
		r.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("server log:\n%s", r.log.String())
		}
	})
	r.launch(t)
	return r
}

func (r *Restartable) launch(t testing.TB) {
	t.Helper()
	r.cmd = exec.Command(r.bin, r.args...)
	r.cmd.Dir = r.dir
	r.cmd.Env = append(os.Environ(), r.env...)
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting the server: %v", err)
	}
	r.exited = make(chan error, 1)
	go func(cmd *exec.Cmd, exited chan error) { exited <- cmd.Wait() }(r.cmd, r.exited)
	r.waitHealthy(t, r.exited)
}

// stop signals the server (SIGKILL also takes its kernels: the whole process group) and waits.
func (r *Restartable) stop(sig syscall.Signal) {
	if r.cmd == nil {
		return
	}
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	} else {
		_ = r.cmd.Process.Signal(sig)
	}
	select {
	case <-r.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
	}
	// Kernels left in the group (a graceful stop shuts them down itself) go too.
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	r.cmd = nil
}

// Kill9 kills the server and its kernels with SIGKILL: no shutdown, no final checkpoint.
func (r *Restartable) Kill9() { r.stop(syscall.SIGKILL) }

// Restart starts the binary again on the same address and data dir and waits for /healthz.
func (r *Restartable) Restart(t testing.TB) {
	t.Helper()
	r.launch(t)
}
