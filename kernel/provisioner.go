package kernel

// provisioner.go is the seam between where a kernel process runs and how we talk to it. It follows
// jupyter_client's split of the KernelProvisioner (provisioning/provisioner_base.py: launch_kernel,
// poll, wait, send_signal, kill, cleanup) from the client and manager that speak ZMQ: a *Kernel
// writes the connection file, asks its Provisioner for a process, and then only talks to that
// process over the sockets the connection file names. The local provisioner (local.go) runs a
// plain child process; kernel/sandbox runs it under bubblewrap. Nothing here knows of sessions.

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"
)

// Provisioner starts processes: kernels (Launch) and a session's one-off shell commands (Command).
// One Provisioner serves every kernel of a server and must be safe for concurrent use.
type Provisioner interface {
	// Launch starts a kernel process. ctx bounds only the start.
	Launch(ctx context.Context, spec LaunchSpec) (KernelProcess, error)
	// Command starts a one-off command with its output going to spec.Stdout and spec.Stderr.
	Command(ctx context.Context, spec CommandSpec) (Process, error)
}

// NetworkIsolator is a Provisioner that can keep a process off the network (LaunchSpec.Network and
// CommandSpec.Network false). Processes of other provisioners always have the host's network, so a
// kernel started for either setting serves both.
type NetworkIsolator interface {
	IsolatesNetwork() bool
}

// IsolatesNetwork reports whether p honours the Network fields.
func IsolatesNetwork(p Provisioner) bool {
	ni, ok := p.(NetworkIsolator)
	return ok && ni.IsolatesNetwork()
}

// LaunchSpec is what a Provisioner needs to start a kernel.
type LaunchSpec struct {
	Argv []string // the kernelspec's argv, connection file filled in
	// Env is the kernel's own environment: the kernelspec's env and Options.Env. The provisioner adds
	// its base (PATH, HOME, locale...); nothing of the server's environment leaks otherwise.
	Env        map[string]string
	Dir        string // cwd of a local process (a sandboxed kernel starts in its /workspace)
	RuntimeDir string // connection file and ipc sockets: must be reachable from the kernel, same path
	LogPath    string // stdout and stderr are appended here
	Network    bool   // the kernel may use the network (see NetworkIsolator)
	// NetworkAllow, when not nil and Network is false, is an egress allowlist: a provisioner that
	// isolates the network lets the kernel out only to these hosts (kernel/sandbox's egress proxy).
	NetworkAllow []string
	// Fresh: the kernel must start from scratch, importing nothing before it runs (Options.Fresh): a
	// provisioner that forks kernels from a pre-imported template (kernel/template) starts it cold.
	Fresh bool
	// Previous is the process this one replaces (Restart): a sandbox keeps its box, so the attached
	// workspace, limits and spool stay. Restart does not Cleanup the previous process.
	Previous KernelProcess
}

// CommandSpec is what a Provisioner needs to start a session's shell command.
type CommandSpec struct {
	Argv         []string
	Dir          string            // host working dir: Workspace or below it
	Env          map[string]string // the session's variables; the provisioner adds PATH, HOME and LANG
	Workspace    string            // host dir of the session's files (/workspace in a box; HOME of a local command)
	Network      bool              // the command may use the network (see NetworkIsolator)
	NetworkAllow []string          // egress allowlist when Network is false (see LaunchSpec)
	// Skills is the host dir of the tenant's skills, shown at /skills by a provisioner that can
	// (read-only unless SkillsWritable); "" for none.
	Skills         string
	SkillsWritable bool
	Limits         Limits // resource limits (where the provisioner enforces any)
	Stdout         io.Writer
	Stderr         io.Writer
}

// Limits are a session's resource wishes as the API spells them ("2", "500m"; "4Gi"). Empty means
// the provisioner's default. A provisioner that enforces none accepts anything.
type Limits struct {
	CPUs   string
	Memory string
}

// LimitError rejects a Limits value: unparseable, or over the provisioner's ceiling.
type LimitError struct {
	Field   string // "cpus" or "memory"
	Message string
}

func (e *LimitError) Error() string { return e.Message }

// StartError means the process could not be started at all (exec failed: no such binary, no
// permission), as opposed to a provisioner failing to prepare where it runs.
type StartError struct {
	Argv0 string
	Err   error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// ExitStatus is how a process ended.
type ExitStatus struct {
	Code   int            // exit code; -1 when killed by a signal or not reaped
	Signal syscall.Signal // the signal that killed it; 0 when it exited
	CPU    time.Duration  // user+system time of the process and the children it reaped
}

// SignalName is the killing signal's name, "" when the process exited.
func (s ExitStatus) SignalName() string {
	if s.Signal == 0 {
		return ""
	}
	return s.Signal.String()
}

// KernelPIDer is a KernelProcess whose PID is a wrapper's (a sandbox's bubblewrap, outside the box):
// KernelPID is the host pid of the kernel's own process, 0 while it is not known. The heartbeat
// reads its state to tell a stopped kernel from a busy one.
type KernelPIDer interface {
	KernelPID() int
}

// Process is one started process, shaped like Popen: what any caller needs, kernels and commands alike.
type Process interface {
	PID() int                        // the process we started (for a sandbox: bubblewrap's wrapper)
	Signal(sig syscall.Signal) error // to its whole process group; ESRCH is not an error
	Kill()                           // SIGKILL to everything it started (group, or whole box), then a bounded wait for the reap
	Exited() <-chan struct{}         // closed once the process is reaped (and its output copied)
	ExitStatus() ExitStatus          // valid after Exited
	Stats() (ProcStats, error)       // CPU and memory of everything it runs
	Cleanup() error                  // release everything (box, mounts, cgroup, uid, spool); idempotent
}

// KernelProcess is a kernel's process, with what differs between a local and a sandboxed kernel as
// far as its user (the session service) is concerned.
type KernelProcess interface {
	Process
	// AttachWorkspace makes the host dir the kernel's workspace: a sandbox mounts it at /workspace
	// (also while running); a local process only records it.
	AttachWorkspace(hostDir string) error
	// KernelPath is the path the kernel sees for a host path in its workspace.
	KernelPath(hostPath string) string
	// Spool is the kernel's checkpoint spool dir, as the server sees it and as the kernel does.
	Spool() (host, kernel string)
	// SetLimits applies a session's limits; a *LimitError rejects them.
	SetLimits(Limits) error
	// InterruptByMessage is true when a signal to the process group cannot interrupt the kernel (a
	// sandbox: SIGINT would hit bubblewrap), so Interrupt sends an interrupt_request instead.
	InterruptByMessage() bool
	// OnLimit sets who hears of limit hits (replacing any earlier callback); a provisioner that
	// enforces no limits never calls it.
	OnLimit(func(LimitHit))
}

// LimitHit is a resource limit a process ran into, and what was done about it.
type LimitHit struct {
	Kind    string // "memory" (OOM kill) or "pids" (fork refused)
	Message string // what happened, for the humans
	// The limits in force (0: none).
	MemoryBytes  int64
	CPUs         float64
	MaxProcesses int
	Summary      string // the same for logs: "memory=4Gi cpus=2 pids=512"
}

// exited reports whether p has been reaped.
func exited(p Process) bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// waitExited waits up to d for p to be reaped.
func waitExited(p Process, d time.Duration) bool {
	if d <= 0 {
		return exited(p)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.Exited():
		return true
	case <-t.C:
		return false
	}
}

var errNoArgv = errors.New("empty argv")
