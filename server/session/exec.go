package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/carryover/carryover"
)

// ExecRequest is the body of POST /api/sessions/{id}/exec: argv, or a string run by /bin/sh -c.
type ExecRequest struct {
	Command        any               `json:"command"`
	WorkingDir     string            `json:"working_dir"`
	Env            map[string]string `json:"env"`
	TimeoutSeconds *float64          `json:"timeout_seconds"`
}

// ExecResult is the exec answer.
type ExecResult struct {
	Stdout        string  `json:"stdout"`
	Stderr        string  `json:"stderr"`
	ExitCode      int     `json:"exit_code"`
	DurationMS    float64 `json:"duration_ms"`
	TimedOut      bool    `json:"timed_out,omitempty"`
	StdoutDropped int64   `json:"stdout_dropped_bytes,omitempty"`
	StderrDropped int64   `json:"stderr_dropped_bytes,omitempty"`
	RecordError   string  `json:"record_error,omitempty"` // the command ran, but its record did not stick
}

// cappedBuffer keeps the first max bytes and counts the rest.
type cappedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int64
	dropped int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - int64(c.buf.Len())
	if room >= int64(len(p)) {
		c.buf.Write(p)
	} else {
		if room > 0 {
			c.buf.Write(p[:room])
		}
		c.dropped += int64(len(p)) - max(room, 0)
	}
	return len(p), nil
}

func (c *cappedBuffer) text() string {
	if c.dropped > 0 {
		return c.buf.String() + fmt.Sprintf("\n[carryover: %d bytes dropped over run.max_output_bytes]\n", c.dropped)
	}
	return c.buf.String()
}

// argv turns the command field into an argv.
func (r ExecRequest) argv() ([]string, error) {
	switch c := r.Command.(type) {
	case string:
		if c == "" {
			return nil, carryover.Errorf(carryover.CodeInvalid, "command must not be empty").WithDetails("field", "command")
		}
		return []string{"/bin/sh", "-c", c}, nil
	case []any:
		if len(c) == 0 {
			return nil, carryover.Errorf(carryover.CodeInvalid, "command must not be empty").WithDetails("field", "command")
		}
		out := make([]string, len(c))
		for i, x := range c {
			s, ok := x.(string)
			if !ok {
				return nil, carryover.Errorf(carryover.CodeInvalid, "command must be a string or a list of strings").WithDetails("field", "command")
			}
			out[i] = s
		}
		return out, nil
	default:
		return nil, carryover.Errorf(carryover.CodeInvalid, "command must be a string or a list of strings").WithDetails("field", "command")
	}
}

// Exec runs a shell command in the session's workspace with its env vars and working dir.
// A timeout kills the whole process group. It counts as an iteration of the budget.
func (s *Service) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	ls, err := s.get(id)
	if err != nil {
		return nil, err
	}
	argv, err := req.argv()
	if err != nil {
		return nil, err
	}
	timeout, err := s.runTimeout(req.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	end, err := s.beginTurn(ctx, ls)
	if err != nil {
		return nil, err
	}
	defer end()
	doc := ls.snapshot()
	wd := req.WorkingDir
	if wd == "" {
		wd = doc.AgentContext.WorkingDir
	}
	rel, err := workspacePath(wd)
	if err != nil {
		return nil, err
	}
	if err := s.mkdirWorkspace(id, rel); err != nil { // never through a symlink the kernel made
		return nil, err
	}
	start := time.Now()
	s.emit(ctx, ls, carryover.EventExecStarted, map[string]any{"command": argv, "working_dir": wd})
	res, cpu, err := s.runCommand(id, doc, argv, rel, req.Env, timeout)
	if err != nil {
		return nil, err
	}
	s.emit(ctx, ls, carryover.EventExecCompleted, map[string]any{"command": argv, "exit_code": res.ExitCode,
		"duration_ms": res.DurationMS, "timed_out": res.TimedOut})
	// Recorded beside the runs, so the session's history (and the UI after a reload) shows it.
	status := "ok"
	if res.ExitCode != 0 || res.TimedOut {
		status = "error"
	}
	if err := s.endTurn(ctx, ls, turnRecord{kind: "exec", code: commandText(req.Command, argv), count: doc.ExecutionCount,
		status: status, answer: res, startedAt: start.UTC(), durationMS: res.DurationMS, cpuSeconds: cpu}); err != nil {
		res.RecordError = err.Error()
	}
	if res.TimedOut {
		return res, (&carryover.Error{Code: carryover.CodeTimeout, Message: fmt.Sprintf("the command exceeded timeout_seconds=%g and was killed", timeout.Seconds()), Result: res})
	}
	return res, nil
}

// runCommand runs argv in the session's workspace dir rel (sandboxed when the server sandboxes) and
// returns its answer and the CPU seconds it used.
func (s *Service) runCommand(id string, doc carryover.Session, argv []string, rel string, reqEnv map[string]string, timeout time.Duration) (*ExecResult, float64, error) {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + s.workspace(id), "LANG=C.UTF-8"}
	for k, v := range doc.AgentContext.EnvVars {
		env = append(env, k+"="+v)
	}
	for k, v := range reqEnv {
		env = append(env, k+"="+v)
	}
	run, release, err := s.execArgv(id, doc, argv, rel, reqEnv) // the sandbox's wrapping (sandbox.go)
	if err != nil {
		return nil, 0, err
	}
	defer release()
	cmd := exec.Command(run[0], run[1:]...)
	cmd.Dir, cmd.Env = s.hostPath(id, rel), env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout := &cappedBuffer{max: s.cfg.Run.MaxOutputBytes}
	stderr := &cappedBuffer{max: s.cfg.Run.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	res := &ExecResult{}
	if err := cmd.Start(); err != nil {
		res.ExitCode, res.Stderr = 127, err.Error()
	} else {
		res.ExitCode, res.TimedOut = waitCommand(cmd, timeout)
		res.Stdout, res.Stderr = stdout.text(), stderr.text()
		res.StdoutDropped, res.StderrDropped = stdout.dropped, stderr.dropped
	}
	res.DurationMS = ms(time.Since(start))
	var cpu float64
	if ps := cmd.ProcessState; ps != nil {
		cpu = (ps.UserTime() + ps.SystemTime()).Seconds()
	}
	return res, cpu, nil
}

// waitCommand waits for a started command, killing its process group at the timeout, and returns
// its exit code (128+signal when killed by one). Children left behind in the group are killed
// too: nothing outlives the exec.
func waitCommand(cmd *exec.Cmd, timeout time.Duration) (exitCode int, timedOut bool) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(timeout):
		timedOut = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-done
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		exitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			exitCode = 128 + int(ws.Signal())
		}
	default:
		exitCode = -1
	}
	return exitCode, timedOut
}

// commandText is the command as the user gave it: the string, or the argv shell-quoted.
func commandText(cmd any, argv []string) string {
	if s, ok := cmd.(string); ok {
		return s
	}
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			parts[i] = a
		} else {
			parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(parts, " ")
}
