package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/kernels"
	"github.com/carryover/carryover/server/session/shellcmd"
	"github.com/carryover/carryover/server/session/workspace"
)

type (
	CommandRequest = shellcmd.Request // POST /api/sessions/{id}/exec
	CommandResult  = shellcmd.Result  // its answer
)

// RunCommand runs a shell command (POST .../exec) in the session's workspace with its env vars and working dir.
// A timeout kills the whole process group. It counts as an iteration of the budget.
func (ls *Session) RunCommand(ctx context.Context, req CommandRequest, opts CommandOptions) (*CommandResult, error) {
	if key := req.IdempotencyKey; key != "" {
		req.IdempotencyKey = ""
		return runKeyed(ctx, ls, "exec", key, req, opts.OnReplay, func(ctx context.Context, started func() error) (*CommandResult, error) {
			return ls.runCommand(ctx, req, started)
		})
	}
	return ls.runCommand(ctx, req, func() error { return nil })
}

// CommandOptions connect a shell command to the front door that sent it.
type CommandOptions struct {
	// OnReplay is called when the answer is the stored one of an earlier attempt with the same
	// idempotency key (the front doors say so: the Idempotent-Replayed header).
	OnReplay func()
}

// runCommand is RunCommand without its key; started is called just before the command starts.
func (ls *Session) runCommand(ctx context.Context, req CommandRequest, started func() error) (*CommandResult, error) {
	s := ls.svc
	argv, err := shellcmd.Argv(req.Command)
	if err != nil {
		return nil, err
	}
	timeout, err := s.cfg.runTimeout(req.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	if err := carryover.ValidateEnv(req.Env, "env"); err != nil {
		return nil, err
	}
	ct := &commandTurn{stop: make(chan struct{})}
	end, err := ls.beginTurnAs(ctx, nil, ct) // Interrupt kills its command (control.go)
	if err != nil {
		return nil, err
	}
	defer end()
	doc := ls.docCopy()
	wd := req.WorkingDir
	if wd == "" {
		wd = doc.AgentContext.WorkingDir
	}
	rel, err := carryover.WorkspacePath(wd)
	if err != nil {
		return nil, err
	}
	if err := ls.mkdirWorkspace(ctx, rel); err != nil { // never through a symlink the kernel made
		return nil, err
	}
	start := time.Now()
	if err := started(); err != nil { // a keyed command starts: its key is kept whatever happens next
		return nil, err
	}
	res, cpu, err := ls.runInSandbox(ctx, doc, req, argv, wd, rel, shellcmd.Bounds{MaxBytes: s.cfg.MaxOutputBytes, Timeout: timeout, Stop: ct.stop})
	if err != nil {
		return nil, err
	}
	if gone := deletedDuring(ls, res); gone != nil {
		return res, gone
	}
	ls.emit(ctx, carryover.EventExecCompleted, map[string]any{"command": argv, "exit_code": res.ExitCode,
		"duration_ms": res.DurationMS, "timed_out": res.TimedOut, "interrupted": res.Interrupted})
	// Recorded beside the runs, so the session's history (and the UI after a reload) shows it.
	status := "ok"
	if res.ExitCode != 0 || res.TimedOut || res.Interrupted {
		status = "error"
	}
	if err := ls.endTurn(ctx, turnRecord{kind: "exec", code: shellcmd.Text(req.Command, argv), count: doc.ExecutionCount,
		status: status, answer: res, startedAt: start.UTC(), durationMS: res.DurationMS, cpuSeconds: cpu}); err != nil {
		res.RecordError = err.Error()
	}
	if res.TimedOut {
		return res, (&carryover.Error{Code: carryover.CodeTimeout, Message: fmt.Sprintf("the command exceeded timeout_seconds=%g and was killed", timeout.Seconds()), Result: res})
	}
	return res, nil
}

// runInSandbox runs argv through the provisioner (the kernels' one: a box of its own with the
// session's workspace, network setting and limits, or a plain process in its own process group) in
// the workspace dir rel, and returns its answer and the CPU seconds it used.
func (ls *Session) runInSandbox(ctx context.Context, doc carryover.Session, req CommandRequest, argv []string, wd, rel string, b shellcmd.Bounds) (*CommandResult, float64, error) {
	s := ls.svc
	skills, err := s.skills.Dir(ctx, doc.TenantName())
	if err != nil {
		return nil, 0, err
	}
	spec := kernel.CommandSpec{Skills: skills, SkillsWritable: doc.Sandbox.Skills == carryover.SkillsReadWrite, Argv: argv,
		Dir: s.cfg.hostPath(ls.id, rel), Env: shellcmd.Env(doc, req), Workspace: s.cfg.workspace(ls.id), Network: doc.Sandbox.Network,
		NetworkAllow: doc.Sandbox.NetworkAllow, Limits: kernel.Limits{CPUs: doc.Sandbox.CPUs, Memory: doc.Sandbox.Memory}}
	return shellcmd.Run(ctx, s.kern.Provisioner(), spec, b, kernels.LimitErr, func() {
		ls.emit(ctx, carryover.EventExecStarted, map[string]any{"command": argv, "working_dir": wd})
	})
}

// mkdirWorkspace creates the workspace dir rel (and its parents) through an os.Root: a symlink a
// kernel left in its workspace cannot make the server, root, create directories elsewhere.
func (ls *Session) mkdirWorkspace(ctx context.Context, rel string) error {
	s := ls.svc
	ws := s.cfg.workspace(ls.id)
	if err := ls.ensureWorkspace(ctx); err != nil {
		return err
	}
	if rel == "" {
		return nil
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.FromSlash(rel), 0o755); err != nil {
		return workspace.PathError(rel, err)
	}
	return nil
}
