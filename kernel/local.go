package kernel

// local.go is the local provisioner: kernels and commands are plain child processes of the server,
// each in a process group of its own, with the server's privileges (jupyter_client's
// LocalProvisioner). It enforces no limits and has no workspace of its own to attach.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// LocalProvisioner runs plain processes. The zero value is ready; Options.Provisioner nil means one.
type LocalProvisioner struct {
	// SpoolRoot, when set, gives each kernel a checkpoint spool dir SpoolRoot/<runtime dir name>,
	// removed by Cleanup. Without it Spool answers "".
	SpoolRoot string
}

// passedEnv are the only server environment variables a local process inherits.
var passedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE"}

// localKernelEnv builds a local kernel's controlled environment: PATH, HOME and the locale from the
// server, then env (which wins). Nothing else leaks (no credentials, no server config).
func localKernelEnv(env map[string]string) []string {
	full := map[string]string{}
	for _, k := range passedEnv {
		if v, ok := os.LookupEnv(k); ok {
			full[k] = v
		}
	}
	if full["PATH"] == "" {
		full["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	// debugpy (imported by ipykernel 6) warns about frozen modules on every start; the warning only
	// pollutes kernel logs.
	full["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
	// ipykernel polls its parent and exits when we are gone, so a crashed server leaves no kernels.
	// Not in a sandbox: inside a pid namespace the parent looks like pid 1 and the poller would kill
	// the kernel at once (bubblewrap has --die-with-parent instead).
	full["JPY_PARENT_PID"] = strconv.Itoa(os.Getpid())
	return envList(full, env)
}

// LocalKernelEnv is the environment a local kernel gets for env (localKernelEnv), for other
// provisioners that run kernels as plain processes (kernel/template's forked children).
func LocalKernelEnv(env map[string]string) []string { return localKernelEnv(env) }

// envList flattens base and then over (which wins) into "K=V" entries.
func envList(base, over map[string]string) []string {
	out := make([]string, 0, len(base)+len(over))
	for k, v := range base {
		if _, ok := over[k]; !ok {
			out = append(out, k+"="+v)
		}
	}
	for k, v := range over {
		out = append(out, k+"="+v)
	}
	return out
}

// Launch starts the kernel as a child process in its own process group.
func (lp *LocalProvisioner) Launch(_ context.Context, spec LaunchSpec) (KernelProcess, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("launch: %w", errNoArgv)
	}
	p, err := StartProcess(ProcessSpec{Argv: spec.Argv, Env: localKernelEnv(spec.Env), Dir: spec.Dir, LogPath: spec.LogPath})
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", spec.Argv[0], err)
	}
	lk := &localKernel{LocalProcess: p}
	if lp.SpoolRoot != "" {
		lk.spool = filepath.Join(lp.SpoolRoot, filepath.Base(spec.RuntimeDir))
	}
	return lk, nil
}

// Command starts a shell command with PATH, LANG and HOME (the workspace) set, then spec.Env.
func (lp *LocalProvisioner) Command(_ context.Context, spec CommandSpec) (Process, error) {
	base := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": spec.Workspace, "LANG": "C.UTF-8"}
	return StartProcess(ProcessSpec{Argv: spec.Argv, Env: envList(base, spec.Env), Dir: spec.Dir,
		Stdout: spec.Stdout, Stderr: spec.Stderr})
}

// localKernel is a local kernel process: it sees host paths, and its spool dir is the same for both sides.
type localKernel struct {
	*LocalProcess
	spool string
}

// AttachWorkspace has nothing to do: a local kernel reaches every host path (the session service
// chdirs it into the workspace).
func (lk *localKernel) AttachWorkspace(string) error { return nil }

func (lk *localKernel) KernelPath(hostPath string) string { return hostPath }
func (lk *localKernel) Spool() (host, kernel string)      { return lk.spool, lk.spool }
func (lk *localKernel) SetLimits(Limits) error            { return nil }
func (lk *localKernel) InterruptByMessage() bool          { return false }
func (lk *localKernel) OnLimit(func(LimitHit))            {}

// Cleanup kills what is left of the process group and removes the spool dir.
func (lk *localKernel) Cleanup() error {
	lk.Kill()
	if lk.spool != "" {
		return os.RemoveAll(lk.spool)
	}
	return nil
}
