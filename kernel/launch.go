package kernel

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one launched kernel process. It is the leader of its own process group (Setpgid), so
// signals reach the kernel and whatever it spawned, and nothing reaches the server.
type process struct {
	cmd     *exec.Cmd
	pid     int
	logPath string
	exited  chan struct{}    // closed once cmd.Wait returned (the process is reaped)
	state   *os.ProcessState // valid after exited
}

// passedEnv are the only server environment variables a kernel inherits.
var passedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE"}

// kernelEnv builds the controlled environment: PATH, HOME and the locale from the server, then the
// kernelspec's env, then opts.Env (which wins). Nothing else leaks (no credentials, no server config).
func kernelEnv(spec *Spec, extra map[string]string, parentPID bool) []string {
	env := map[string]string{}
	for _, k := range passedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	// debugpy (imported by ipykernel 6) warns about frozen modules on every start; the warning only
	// pollutes kernel logs.
	env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
	if parentPID {
		// ipykernel polls its parent and exits when we are gone, so a crashed server leaves no kernels.
		// Not under a Wrap: inside a pid namespace the parent looks like pid 1 and the poller would
		// kill the kernel at once; wrappers have their own (bwrap --die-with-parent).
		env["JPY_PARENT_PID"] = strconv.Itoa(os.Getpid())
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// launch starts argv in its own process group with stdout and stderr appended to logPath. The log
// file is handed to the child as a plain fd, so no goroutine copies output.
func launch(argv, env []string, workDir, logPath string) (*process, error) {
	if len(argv) == 0 {
		return nil, errors.New("launch: empty argv")
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("launch: kernel log: %w", err)
	}
	defer logf.Close() // the child has its own copy of the fd
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = workDir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("launch %s: %w", argv[0], err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState; the error only repeats it
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	return p, nil
}

// alive reports whether the process has not been reaped yet.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signalGroup sends sig to the whole process group. ESRCH (nobody left) is not an error.
func (p *process) signalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to process group %d: %w", sig, p.pid, err)
	}
	return nil
}

// waitExit waits up to d for the process to be reaped.
func (p *process) waitExit(d time.Duration) bool {
	if d <= 0 {
		return !p.alive()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// kill SIGKILLs the group and waits (bounded) for the reap; used on failed starts and as the last
// step of a shutdown.
func (p *process) kill() {
	_ = p.signalGroup(syscall.SIGKILL)
	p.waitExit(5 * time.Second)
}

// exitDetail returns the exit code (-1 if killed by a signal) and signal name of a reaped process.
func (p *process) exitDetail() (code int, signal string) {
	if p.state == nil {
		return -1, ""
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal().String()
	}
	return p.state.ExitCode(), ""
}

// logTail returns the last lines (at most ~2 KiB) of the kernel log, for error messages.
func logTail(path string) string {
	const max = 2048
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := fi.Size() - max
	if off < 0 {
		off = 0
	}
	b, err := io.ReadAll(io.NewSectionReader(f, off, max))
	if err != nil {
		return ""
	}
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:] // drop the partial first line
		}
	}
	return strings.TrimRight(s, "\n")
}
