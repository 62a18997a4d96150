package kernels

// setup.go points a claimed kernel at its session: its workspace, limits and skills attached, then
// its working directory, env vars and execution counter set by the agent (agentops.Setup), now or
// riding on the session's first cell (the service's setup.go).

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/agentops"
)

// Setup is what points a kernel at its session. Its JSON is the agent's carryover_setup.
type Setup struct {
	Cwd            string            `json:"cwd"` // as the kernel sees it
	Env            map[string]string `json:"env"`
	ExecutionCount int               `json:"execution_count,omitempty"` // the next cell's; 0: leave it
}

// HostPath maps a sandbox path (/workspace/...) or a relative one to the host directory of the
// workspace ws.
func HostPath(ws, p string) string {
	p = strings.TrimPrefix(p, "/workspace")
	return filepath.Join(ws, filepath.FromSlash(strings.TrimPrefix(p, "/")))
}

// Prepare points a pooled kernel at the session: cwd, env vars and execution counter.
func (f *Factory) Prepare(ctx context.Context, id string, k *kernel.Kernel, doc carryover.Session) error {
	if err := f.attachForSetup(ctx, id, k, doc); err != nil {
		return err
	}
	return agentops.Setup(ctx, k, f.setupOf(id, k, doc, true))
}

// Defer attaches a just-claimed kernel to the session and returns its set-up, to ride on the
// first cell (the execution counter is left as it is: a kernel that has run no cell, for a session
// that has run none).
func (f *Factory) Defer(ctx context.Context, id string, k *kernel.Kernel, doc carryover.Session) (Setup, error) {
	if err := f.attachForSetup(ctx, id, k, doc); err != nil {
		return Setup{}, err
	}
	return f.setupOf(id, k, doc, false), nil
}

// attachForSetup makes the session's workspace and attaches the kernel to it (limits, mounts).
func (f *Factory) attachForSetup(ctx context.Context, id string, k *kernel.Kernel, doc carryover.Session) error {
	if err := os.MkdirAll(f.workspace(id), 0o755); err != nil {
		return err
	}
	return f.attachKernel(ctx, id, k, doc)
}

// setupOf is the session's set-up for kernel k; withCount sets the kernel's counter too.
func (f *Factory) setupOf(id string, k *kernel.Kernel, doc carryover.Session, withCount bool) Setup {
	st := Setup{
		// The path the kernel sees: /workspace/... in a sandbox, the host dir for a local kernel.
		Cwd: k.Process().KernelPath(HostPath(f.workspace(id), doc.AgentContext.WorkingDir)),
		Env: doc.AgentContext.EnvVars,
	}
	if st.Env == nil {
		st.Env = map[string]string{}
	}
	if withCount {
		st.ExecutionCount = doc.ExecutionCount + 1
	}
	return st
}
