package kernel

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ProcessSpec is one child process to start.
type ProcessSpec struct {
	Argv    []string
	Env     []string // the whole environment ("K=V"); nothing else is passed
	Dir     string
	LogPath string    // when set, stdout and stderr are appended to this file (and Stdout/Stderr ignored)
	Stdout  io.Writer // else: where output goes (nil: discarded)
	Stderr  io.Writer
}

// LocalProcess is a child process that leads a process group of its own (Setpgid), so signals reach
// it and whatever it spawned, and nothing reaches the server. It is the local provisioner's process
// and what other provisioners build on (the sandbox's is bubblewrap's wrapper).
type LocalProcess struct {
	cmd    *exec.Cmd
	pid    int
	exited chan struct{}    // closed once cmd.Wait returned (reaped, output copied)
	state  *os.ProcessState // valid after exited
}

// StartProcess starts s. A log file is handed to the child as a plain fd, so no goroutine copies a
// kernel's output. An exec failure is a *StartError.
func StartProcess(s ProcessSpec) (*LocalProcess, error) {
	if len(s.Argv) == 0 {
		return nil, errNoArgv
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Env, cmd.Dir = s.Env, s.Dir
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	if s.LogPath != "" {
		logf, err := os.OpenFile(s.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("kernel log: %w", err)
		}
		defer logf.Close() // the child has its own copy of the fd
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	// Pdeathsig: the process dies with the server, kill -9 included (its own group keeps it from our
	// signals). ipykernel's parent poller only notices a parent that became pid 1, never one that
	// died under a subreaper (systemd --user, tini, a supervisor). The signal follows the forking
	// thread, which the Go runtime never ends here (kernel/sandbox/netns.go keeps its threads alive).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, &StartError{Argv0: s.Argv[0], Err: err}
	}
	p := &LocalProcess{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState; the error only repeats it
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	return p, nil
}

// PID is the process's pid, also its process group id.
func (p *LocalProcess) PID() int { return p.pid }

// Exited is closed once the process is reaped.
func (p *LocalProcess) Exited() <-chan struct{} { return p.exited }

// Signal sends sig to the whole process group. ESRCH (nobody left) is not an error.
func (p *LocalProcess) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to process group %d: %w", sig, p.pid, err)
	}
	return nil
}

// Kill SIGKILLs the group and waits (bounded) for the reap.
func (p *LocalProcess) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	waitExited(p, 5*time.Second)
}

// ExitStatus says how the reaped process ended.
func (p *LocalProcess) ExitStatus() ExitStatus {
	if !exited(p) || p.state == nil {
		return ExitStatus{Code: -1}
	}
	st := ExitStatus{Code: p.state.ExitCode(), CPU: p.state.UserTime() + p.state.SystemTime()}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Code, st.Signal = -1, ws.Signal()
	}
	return st
}

// Stats sums the process group's figures (GroupStats).
func (p *LocalProcess) Stats() (ProcStats, error) { return GroupStats(p.pid) }

// Cleanup kills what is left of the group.
func (p *LocalProcess) Cleanup() error {
	p.Kill()
	return nil
}
