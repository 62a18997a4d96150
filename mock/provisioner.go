package mock

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/carryover/carryover/kernel"
)

// ErrNoKernels is what Provisioner.Launch answers without a LaunchFn: unit tests run no kernel.
var ErrNoKernels = errors.New("mock: this provisioner starts no kernels")

// Provisioner is a kernel.Provisioner whose methods are its function fields. Without LaunchFn every
// kernel start fails (ErrNoKernels); without CommandFn every command exits 0 with no output.
type Provisioner struct {
	LaunchFn  func(ctx context.Context, spec kernel.LaunchSpec) (kernel.KernelProcess, error)
	CommandFn func(ctx context.Context, spec kernel.CommandSpec) (kernel.Process, error)

	mu       sync.Mutex
	commands []kernel.CommandSpec
}

var _ kernel.Provisioner = (*Provisioner)(nil)

// Launch calls LaunchFn, or fails with ErrNoKernels.
func (p *Provisioner) Launch(ctx context.Context, spec kernel.LaunchSpec) (kernel.KernelProcess, error) {
	if p.LaunchFn != nil {
		return p.LaunchFn(ctx, spec)
	}
	return nil, ErrNoKernels
}

// Command records spec and calls CommandFn (or answers an exit 0).
func (p *Provisioner) Command(ctx context.Context, spec kernel.CommandSpec) (kernel.Process, error) {
	p.mu.Lock()
	p.commands = append(p.commands, spec)
	p.mu.Unlock()
	if p.CommandFn != nil {
		return p.CommandFn(ctx, spec)
	}
	return Exited(0), nil
}

// Commands returns the specs of the commands started so far.
func (p *Provisioner) Commands() []kernel.CommandSpec {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]kernel.CommandSpec(nil), p.commands...)
}

// Process is a kernel.Process that exits on its own (Exited) or only when killed (Hanging).
type Process struct {
	Status kernel.ExitStatus // what ExitStatus answers once it ended (Kill sets Signal SIGKILL if still running)

	mu     sync.Mutex
	exited chan struct{}
	done   bool
	killed bool
}

var _ kernel.Process = (*Process)(nil)

// Exited is a process that has already exited with code.
func Exited(code int) *Process {
	p := &Process{Status: kernel.ExitStatus{Code: code}, exited: make(chan struct{})}
	p.end()
	return p
}

// Hanging is a process that runs until it is killed.
func Hanging() *Process { return &Process{exited: make(chan struct{})} }

// WithCPU sets the CPU time the process reports and returns it.
func (p *Process) WithCPU(d time.Duration) *Process { p.Status.CPU = d; return p }

func (p *Process) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		p.done = true
		close(p.exited)
	}
}

// Killed reports whether Kill was called while the process still ran.
func (p *Process) Killed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

func (p *Process) PID() int                         { return 4242 }
func (p *Process) Signal(syscall.Signal) error      { return nil }
func (p *Process) Exited() <-chan struct{}          { return p.exited }
func (p *Process) Stats() (kernel.ProcStats, error) { return kernel.ProcStats{}, nil }
func (p *Process) Cleanup() error                   { return nil }

// Kill ends a running process with SIGKILL (an ended one is left as it was).
func (p *Process) Kill() {
	p.mu.Lock()
	if !p.done {
		p.killed = true
		p.Status = kernel.ExitStatus{Code: -1, Signal: syscall.SIGKILL, CPU: p.Status.CPU}
	}
	p.mu.Unlock()
	p.end()
}

// ExitStatus is how the process ended.
func (p *Process) ExitStatus() kernel.ExitStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Status
}
