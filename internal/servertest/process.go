package servertest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Options are a server process's settings beyond its address and data dir.
type Options struct {
	Token string   // --auth.token
	Flags []string // more flags of `carryover serve`, e.g. --pool.size 1
	Env   []string // more environment, e.g. CARRYOVER_SANDBOX_ENABLED=false
	Dir   string   // the process's directory (its data dir is Dir/data); "" = a new temp dir
	// StopGrace is how long Stop waits after SIGTERM before it kills the process group (0: 15 s):
	// a cluster node drains its turns first.
	StopGrace time.Duration
	Race      bool // run RaceBinary: the server's code under the race detector
	// PreImport keeps the configured persistence.pre_import (numpy, pandas, matplotlib.pyplot). By
	// default a test's server imports nothing ahead, as Config's in-process servers do: its kernel
	// template imported them at every start (~1.2 s of CPU, ~90 starts a make test), for sessions
	// that mostly never use them. A test that passes its own --config decides for itself.
	PreImport bool
}

// Process is the carryover binary serving on a loopback port with its own data dir. A test can
// kill it -9 and start it again on the same address and data dir, as a crash and a supervisor's
// restart would: clients that reconnect to the same URL find the new process.
type Process struct {
	Base  string // http://127.0.0.1:PORT
	Token string
	Dir   string
	log   SyncBuffer

	bin     string
	args    []string
	env     []string
	cmd     *exec.Cmd
	exited  chan error
	done    chan struct{}    // closed when the current run of the process ended (Exited)
	state   *os.ProcessState // how the last run ended (ExitCode)
	grace   time.Duration    // Options.StopGrace
	tempDir bool             // Dir was made by Launch: Stop removes it
	// leaked are the mounts a run that exited by itself on SIGTERM left under Dir (a server's shutdown
	// unmounts its workspace disks; StartProcess fails the test on them). Stop detaches them.
	leaked []string
}

// Exited is closed when the process (its current run) ends, for whatever reason.
func (p *Process) Exited() <-chan struct{} { return p.done }

// ExitCode is the exit code of the process's last run once Exited is closed (-1 before, or for a
// process killed by a signal).
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.state.ExitCode()
	default:
		return -1
	}
}

// Signal sends sig to the server process alone (not its group): SIGSTOP and SIGCONT pause and
// resume it while its kernels run on.
func (p *Process) Signal(sig syscall.Signal) {
	if pid := p.PID(); pid != 0 {
		_ = syscall.Kill(pid, sig)
	}
}

// AddEnv sets more environment for the next Restart (a later value of a name wins): a rolling
// upgrade restarts a node as the next build.
func (p *Process) AddEnv(kv ...string) { p.env = append(p.env, kv...) }

// PID is the server process's pid (its kernels are its children); 0 when it is not running.
func (p *Process) PID() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Log is what the server printed so far (all its runs).
func (p *Process) Log() string { return p.log.String() }

// StartProcess launches the binary (Binary) with o and waits for /healthz; the process (and any
// kernel it left) is stopped when the test ends, and its log shown if the test failed.
func StartProcess(t testing.TB, o Options) *Process {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	p, err := Launch(o)
	if p != nil {
		t.Cleanup(func() {
			p.Stop()
			if len(p.leaked) > 0 {
				t.Errorf("the server exited on SIGTERM but left mounted: %v", p.leaked)
			}
			if t.Failed() {
				t.Logf("server log:\n%s", p.Log())
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Launch is StartProcess without a test (for TestMain): the caller stops the process. On an error
// after the process started, the process is returned too, stopped, for its log.
func Launch(o Options) (*Process, error) {
	binOf := Binary
	if o.Race {
		binOf = RaceBinary
	}
	bin, err := binOf()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// No pool growth under the tests' back-to-back creates unless a test asks (its Env comes later
	// and wins): each grown kernel imports pre_import on a machine the whole suite shares.
	env := append([]string{"CARRYOVER_POOL_MAX_SIZE=0",
		"CARRYOVER_KERNEL_STARTUP_TIMEOUT_SECONDS=" + strconv.Itoa(StartupTimeoutSeconds)}, o.Env...)
	p := &Process{Base: "http://" + addr, Token: o.Token, Dir: o.Dir, bin: bin, env: env, grace: o.StopGrace}
	if p.grace == 0 {
		p.grace = 15 * time.Second
	}
	if p.Dir == "" {
		if p.Dir, err = os.MkdirTemp("", "carryover-test-"); err != nil {
			return nil, err
		}
		p.tempDir = true
	}
	p.args = []string{"serve", "--server.addr", addr, "--data_dir", filepath.Join(p.Dir, "data"), "--auth.token", o.Token}
	if !o.PreImport {
		// Only a config file says "none": an empty CARRYOVER_PERSISTENCE_PRE_IMPORT counts as unset.
		// The test's own --config, later in the flags, wins.
		f := filepath.Join(p.Dir, "servertest-no-pre-import.yaml")
		if err := os.WriteFile(f, []byte("persistence:\n  pre_import: []\n"), 0o600); err != nil {
			p.Stop()
			return p, err
		}
		p.args = append(p.args, "--config", f)
	}
	p.args = append(p.args, o.Flags...)
	if err := p.launch(); err != nil {
		p.Stop()
		return p, err
	}
	return p, nil
}

// launch starts the process and waits up to 60 s for /healthz, failing at once if it exits.
func (p *Process) launch() error {
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Dir = p.Dir
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its kernels join its group: one kill takes all
	if err := p.cmd.Start(); err != nil {
		p.cmd = nil
		return fmt.Errorf("servertest: starting the server: %w", err)
	}
	p.exited, p.done = make(chan error, 1), make(chan struct{})
	go func(cmd *exec.Cmd, exited chan error, done chan struct{}) {
		err := cmd.Wait()
		p.state = cmd.ProcessState
		close(done)
		exited <- err
	}(p.cmd, p.exited, p.done)

	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(p.Base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-p.exited:
			p.exited <- err // for stop
			return fmt.Errorf("servertest: the server exited before answering /healthz: %v\n%s", err, p.Log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servertest: no /healthz answer from %s in 60 s (last error %v)\n%s", p.Base, err, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop signals the server and waits; after its grace (15 s), or for SIGKILL at once, the whole process group
// (the server and its kernels) is killed. Kernels left in the group go too.
func (p *Process) stop(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	clean := sig != syscall.SIGKILL // the exit is the server's own answer to SIGTERM
	select {
	case <-p.done:
		clean = false // it had ended already (crashed, or a fatal error)
	default:
	}
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	} else {
		_ = p.cmd.Process.Signal(sig)
	}
	select {
	case <-p.exited:
	case <-time.After(p.grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		clean = false
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd = nil
	// A killed server leaves its workspace disks mounted, and the test's temp dir could not be
	// removed (EBUSY: the chaos cluster's nodes, killed after their grace on a loaded machine).
	if left := unmountLeft(p.Dir); clean && len(left) > 0 {
		p.leaked = append(p.leaked, left...)
	}
}

// Stop ends the server gracefully (SIGTERM; idempotent) and removes a directory Launch made.
func (p *Process) Stop() {
	p.stop(syscall.SIGTERM)
	if p.tempDir {
		os.RemoveAll(p.Dir)
		p.tempDir = false
	}
}

// Kill9 kills the server and its kernels with SIGKILL: no shutdown, no final checkpoint.
func (p *Process) Kill9() { p.stop(syscall.SIGKILL) }

// Restart starts the binary again on the same address and data dir and waits for /healthz.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	if err := p.launch(); err != nil {
		t.Fatal(err)
	}
}
