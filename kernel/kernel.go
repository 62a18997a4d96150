package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure Start. Zero values get the documented defaults.
type Options struct {
	Spec              *Spec             // default: FindSpec("python3", "")
	Transport         string            // "ipc" (default) or "tcp" (127.0.0.1, free ports)
	RuntimeDir        string            // base dir for the per-kernel subdir (connection file, ipc sockets, log); default os.TempDir()/carryover-<uid>
	WorkDir           string            // cwd of the kernel process; default: the per-kernel runtime subdir
	Env               map[string]string // the controlled environment (PATH, HOME, LANG... plus these); nothing else leaks
	LogPath           string            // kernel stdout+stderr go here (default: kernel.log in the runtime subdir)
	StartupTimeout    time.Duration     // default 30s
	HeartbeatInterval time.Duration     // default 500ms; 3 missed beats (of a stopped or gone process) or process exit => dead
	// IdleHeartbeatInterval is the heartbeat's pace while the kernel is idle (no request of ours
	// awaits a reply, its last status was idle); default 10 x HeartbeatInterval. A request sent
	// brings back HeartbeatInterval at once (startHeartbeat).
	IdleHeartbeatInterval time.Duration
	// WedgedAfter is how long a kernel whose process still runs may go without a heartbeat echo
	// (starved by an overloaded host, frozen) before it counts as dead; default 30s.
	WedgedAfter   time.Duration
	ShutdownGrace time.Duration // default 2s
	// Provisioner starts the kernel process (nil: a LocalProvisioner without spool). It is told the
	// runtime subdir, which must stay reachable from the kernel at the same path.
	Provisioner  Provisioner
	Network      bool     // passed to the provisioner (a sandbox cuts the kernel off the network otherwise)
	NetworkAllow []string // egress allowlist passed to the provisioner when Network is false
	// Fresh asks for a kernel started from scratch: nothing imported before the session's env reaches
	// it (a session whose env sets variables read at import, ImportTimeEnv). Passed to the provisioner.
	Fresh  bool
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Spec == nil {
		s, err := FindSpec("python3", "")
		if err != nil {
			return o, err
		}
		o.Spec = s
	}
	if len(o.Spec.Argv) == 0 {
		return o, errors.New("kernelspec has an empty argv")
	}
	switch o.Transport {
	case "":
		o.Transport = "ipc"
	case "ipc", "tcp":
	default:
		return o, fmt.Errorf("unknown transport %q (want ipc or tcp)", o.Transport)
	}
	if o.RuntimeDir == "" {
		o.RuntimeDir = defaultRuntimeBase()
	}
	if o.StartupTimeout <= 0 {
		o.StartupTimeout = 30 * time.Second
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 500 * time.Millisecond
	}
	if o.IdleHeartbeatInterval < o.HeartbeatInterval {
		o.IdleHeartbeatInterval = idleBeatsFactor * o.HeartbeatInterval
	}
	if o.WedgedAfter <= 0 {
		o.WedgedAfter = 30 * time.Second
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Provisioner == nil {
		o.Provisioner = &LocalProvisioner{}
	}
	return o, nil
}

// KernelInfo is the content of the kernel_info_reply the kernel sent when it became ready.
type KernelInfo struct {
	Status                string       `json:"status"`
	ProtocolVersion       string       `json:"protocol_version"`
	Implementation        string       `json:"implementation"`
	ImplementationVersion string       `json:"implementation_version"`
	LanguageInfo          LanguageInfo `json:"language_info"`
	Banner                string       `json:"banner"`
}

// LanguageInfo is kernel_info_reply.language_info.
type LanguageInfo struct {
	Name              string          `json:"name"`
	Version           string          `json:"version"`
	Mimetype          string          `json:"mimetype"`
	FileExtension     string          `json:"file_extension"`
	PygmentsLexer     string          `json:"pygments_lexer"`
	CodemirrorMode    json.RawMessage `json:"codemirror_mode,omitempty"`
	NbconvertExporter string          `json:"nbconvert_exporter"`
}

// Kernel is one kernel, possibly across restarts. All methods are safe for concurrent use.
type Kernel struct {
	id   string
	opts Options
	dir  string
	log  *slog.Logger

	execSem chan struct{} // 1 slot: executes are serialised
	lifeMu  sync.Mutex    // serialises Restart and Shutdown

	mu         sync.RWMutex
	inst       *instance     // current incarnation; never nil after Start
	restarting chan struct{} // non-nil while Restart runs; closed when it is done
	closed     bool          // Shutdown was called

	badSigs atomic.Uint64
	// interrupts counts Interrupt calls: an execute that an interrupt reached may lose its reply
	// (LostReplyGrace).
	interrupts atomic.Uint64
	// inputs counts the messages sent to the kernel (heartbeats aside) and its processes (Inputs).
	inputs atomic.Uint64

	subsMu sync.Mutex                                   // serialises changes to subs
	subs   [numChannels]atomic.Pointer[[]*subscription] // raw subscribers by channel (raw.go); read lock-free by the readers
}

// Start launches a kernel through opts.Provisioner and returns when it is ready: kernel_info_reply on
// shell AND at least one iopub message received (nudging with kernel_info_request until then), within
// StartupTimeout. ctx bounds only the start; the kernel lives until Shutdown.
func Start(ctx context.Context, opts Options) (*Kernel, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	dir, err := makeRuntimeDir(opts.RuntimeDir)
	if err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	if opts.LogPath == "" {
		opts.LogPath = filepath.Join(dir, "kernel.log")
	}
	if opts.WorkDir == "" {
		opts.WorkDir = dir
	}
	id := randomHex(8)
	k := &Kernel{
		id:      id,
		opts:    opts,
		dir:     dir,
		log:     opts.Logger.With("kernel", id),
		execSem: make(chan struct{}, 1),
	}
	inst, err := k.launchInstance(ctx, nil)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	k.inst = inst
	return k, nil
}

// current returns the current incarnation.
func (k *Kernel) current() *instance {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.inst
}

// ID is a random id, stable across restarts.
func (k *Kernel) ID() string { return k.id }

// PID is the pid of the current kernel process (the leader of its process group; for a sandboxed
// kernel, bubblewrap's wrapper).
func (k *Kernel) PID() int { return k.current().proc.PID() }

// Process is the current kernel process, as its provisioner gave it: its workspace, spool, limits
// and resource figures. It changes with Restart.
func (k *Kernel) Process() KernelProcess { return k.current().proc }

// RuntimeDir is the per-kernel runtime subdir (connection file, ipc sockets, default log).
func (k *Kernel) RuntimeDir() string { return k.dir }

// LogPath is where the kernel's stdout and stderr go.
func (k *Kernel) LogPath() string { return k.opts.LogPath }

// Connection returns the connection info of the current process (it holds the signing key).
func (k *Kernel) Connection() ConnectionInfo { return k.current().conn }

// Spec is the kernelspec this kernel was started from.
func (k *Kernel) Spec() *Spec { return k.opts.Spec }

// Info is the kernel_info_reply of the current process.
func (k *Kernel) Info() KernelInfo { return k.current().info }

// Dead is closed when the current process died (heartbeat or process exit), was shut down, or was
// replaced by Restart. After a Restart, call Dead again for the new process's channel.
func (k *Kernel) Dead() <-chan struct{} { return k.current().dead }

// Err says why the current process is dead (a *DiedError); nil while it is alive.
func (k *Kernel) Err() error { return k.current().deadErr() }

// StartedAt is when the current process was launched.
func (k *Kernel) StartedAt() time.Time { return k.current().started }

// BadSignatures counts received messages dropped for a bad HMAC, over the kernel's whole life.
func (k *Kernel) BadSignatures() uint64 { return k.badSigs.Load() }

// Inputs counts what could have changed the kernel's state from outside: every message sent to it
// (requests, comm messages, input replies, interrupts; heartbeats aside) and every process it ran
// in (a restart). Equal counts mean nothing was sent in between; an execute's ExecResult.Input is
// the count with its request.
func (k *Kernel) Inputs() uint64 { return k.inputs.Load() }
