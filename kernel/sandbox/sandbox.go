// Package sandbox runs kernels and shell commands under bubblewrap with resource limits.
//
// What a sandbox is (see docs/sandbox.md, "What is not isolated", for what it does not stop):
//   - a read-only system: /usr (and the /bin, /sbin, /lib* links or dirs), an allowlist of /etc
//     (Debian's numpy needs /etc/alternatives; secrets and the server's own config are not on it),
//     and a synthetic /etc/passwd and /etc/group;
//   - a private /tmp and /dev/shm (size-capped tmpfs), a fresh /proc for its own pid namespace, and a
//     minimal /dev of its own (null, zero, full, random, urandom, a private devpts for ptys; a new
//     session with no controlling terminal, so no TIOCSTI into the server's terminal);
//   - /workspace: the session's workspace and nothing else of the data dir;
//   - new pid, ipc, uts and cgroup namespaces, and a new network namespace (only loopback) unless the
//     session asked for network;
//   - no capabilities (bounding set emptied), no_new_privs, and a uid of its own: every box gets a
//     distinct unprivileged uid from a range, so RLIMIT_NPROC is per box and two sandboxes never
//     share a uid (workspaces are idmapped to it, see mount.go); the environment is cleared and
//     rebuilt from what the caller passes;
//   - a cgroup of its own (memory, pids, cpu) under the server's cgroup, joined before bubblewrap
//     runs, with rlimit fallbacks (RLIMIT_AS, RLIMIT_NPROC) where cgroups cannot be delegated;
//   - --die-with-parent, and a pid namespace whose init takes every process with it.
//
// The warm pool and /workspace. Kernels are started before the session that will use them is known,
// yet /workspace must be that session's directory and nothing else. Every kernel box therefore binds
// an empty mount point of its own (<state>/<box>/workspace) at /workspace; the state dir is a shared
// mount, so when a session claims the kernel the server mounts the session's workspace onto that
// mount point and the mount propagates into the running sandbox (Box.Attach: one open_tree +
// mount_setattr + move_mount, ~0.1 ms; the kernel then chdirs to /workspace). Measured on the CI
// machine: session create -> first result 14-27 ms with a warm sandboxed pool, the same as without a
// sandbox. The alternatives lose: a sandboxed kernel started per session costs the whole ~0.4-0.5 s
// Python start; moving the session's files into the kernel's dir and back costs a copy or a rename
// per file and needs crash recovery for half-moved workspaces. With propagation the workspace never
// moves, and a crash leaves nothing but mounts that the next start detaches (setupSharedDir).
//
// bubblewrap runs privileged (the server is root): it creates the namespaces, and setpriv then drops
// to the box uid with an empty bounding set before the kernel's Python starts. Without root the
// propagation and the per-box uids are impossible, so New refuses and the caller runs plain
// processes with a loud warning. Where the data dir's filesystem refuses idmapped mounts, boxes run
// as uid 0 with no capabilities (weaker: root-owned files that are bound in stay writable by owner
// right; RLIMIT_NPROC does not apply to uid 0), and New logs that loudly.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultEtc is the part of /etc a sandbox sees: the dynamic linker's cache, alternatives (BLAS),
// name-service and TLS basics, time zone, locale and MIME data, and Python's and matplotlib's
// system config. Missing entries are skipped.
var DefaultEtc = []string{
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
	"nsswitch.conf", "hosts", "host.conf", "gai.conf", "resolv.conf", "protocols", "services", "networks",
	"ssl/certs", "ca-certificates", "ca-certificates.conf", "mime.types", "mailcap", "magic", "magic.mime",
	"matplotlibrc", "fonts", "python3", "os-release", "debian_version", "inputrc", "terminfo",
}

// Config configures a Manager. Zero values get the documented defaults.
type Config struct {
	Bwrap    string   // bubblewrap binary; default "bwrap" on PATH
	Setpriv  string   // util-linux setpriv; default "setpriv" on PATH
	Prlimit  string   // util-linux prlimit; default "prlimit" on PATH
	StateDir string   // per-box mount points and files; becomes a shared mount (required)
	UIDBase  int      // first sandbox uid; default 200000
	UIDCount int      // number of sandbox uids (= most boxes at once); default 10000
	Etc      []string // /etc entries bound read-only; default DefaultEtc
	ROBinds  []string // extra host paths bound read-only at the same path (e.g. /opt/tools)
	TmpSize  int64    // size of each of /tmp and /dev/shm; default 1 GiB
	// TmpInodes caps the files of /tmp (tmp.go); 0: the kernel's default (half the RAM's pages).
	TmpInodes int
	NoCgroup  bool // do not use cgroups even where they work (rlimits only)
	// NoSeccomp runs boxes without the system-call filter (seccomp.go); only for measuring its cost.
	NoSeccomp bool
	// LockDir holds one lock file per sandbox uid in use, so that servers sharing a host never hand
	// out the same uid (a uid is also how a box's leftovers are found and killed); default
	// /run/carryover-sandbox-uids, else <tmp>/carryover-sandbox-uids.
	LockDir string
	Logger  *slog.Logger
}

// Manager creates boxes. Safe for concurrent use.
type Manager struct {
	cfg                   Config
	bwrap, setpriv, prlim string
	cat                   string
	cg                    *cgroups
	log                   *slog.Logger
	idmap                 bool     // boxes get their own uid and idmapped mounts (else: uid 0, no caps)
	seccomp               string   // the filter program's file, read by bubblewrap on fd 3 ("" for none)
	etc                   *etcCopy // the /etc allowlist as one directory (etc.go)
	mu                    sync.Mutex
	next                  int              // next uid offset to try
	uids                  map[int]*os.File // in use, with their flock'ed lock files
	userns                map[int]int      // uid -> user namespace fd (idmapped mounts)
	boxes                 map[string]*Box
	closed                bool
}

var instances atomic.Int64

// Probe checks that bubblewrap runs here at all: `true` in a box of /usr alone, as the boxes bind it.
// It binds no more than that on purpose: `--ro-bind / /` remounts every mount of the host, those
// other boxes are making and removing under /tmp included, and failed with EINVAL when one of them
// changed under it (seen with sandbox tests in parallel; a server starting beside busy boxes would
// have fallen back to plain processes).
func Probe(bwrap string) error {
	if bwrap == "" {
		bwrap = "bwrap"
	}
	path, err := exec.LookPath(bwrap)
	if err != nil {
		return fmt.Errorf("bubblewrap not found: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--unshare-pid", "--unshare-net", "true"}
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --ro-bind /usr /usr ... true: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// New probes bubblewrap, prepares the shared state dir and the cgroups, and returns a Manager. Any
// error means: no sandbox here (the caller warns and runs plain processes).
func New(cfg Config) (*Manager, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("sandbox: StateDir is required")
	}
	cfg.withDefaults()
	if os.Geteuid() != 0 {
		return nil, errors.New("sandbox: the server is not root: per-session uids and workspace mounts need root")
	}
	if err := Probe(cfg.Bwrap); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := os.MkdirAll(cfg.LockDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: uid lock dir: %w", err)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, uids: map[int]*os.File{}, userns: map[int]int{}, boxes: map[string]*Box{}}
	if err := m.lookTools(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	m.cfg.StateDir = abs
	if err := setupSharedDir(abs); err != nil {
		return nil, fmt.Errorf("sandbox: state dir: %w", err)
	}
	m.etc = newEtcCopy("/etc", abs+".etc", m.cfg.Etc, etcMountPoints(m.cfg.ROBinds))
	if !cfg.NoSeccomp {
		if err := m.writeSeccomp(); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	if err := m.probeIDMap(abs); err != nil {
		m.log.Error("SANDBOX WEAKENED: idmapped mounts are refused on the data dir's filesystem; sandboxed processes run as uid 0 without capabilities instead of an unprivileged uid of their own",
			"dir", abs, "err", err)
	} else {
		m.idmap = true
	}
	if !cfg.NoCgroup {
		m.cg = detectCgroups(fmt.Sprintf("carryover-%d-%d", os.Getpid(), instances.Add(1)), m.log)
	}
	m.sweepLeftovers()
	return m, nil
}

// withDefaults fills the zero fields of c with their documented defaults.
func (c *Config) withDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.UIDBase <= 0 {
		c.UIDBase = 200000
	}
	if c.UIDCount <= 0 {
		c.UIDCount = 10000
	}
	if c.Etc == nil {
		c.Etc = DefaultEtc
	}
	if c.TmpSize == 0 {
		c.TmpSize = 1 << 30
	}
	if c.LockDir == "" {
		c.LockDir = "/run/carryover-sandbox-uids"
		if unix.Access("/run", unix.W_OK) != nil {
			c.LockDir = filepath.Join(os.TempDir(), "carryover-sandbox-uids")
		}
	}
}

// lookTools finds bubblewrap, setpriv, prlimit and cat on PATH (or where the config says).
func (m *Manager) lookTools() error {
	var err error
	look := func(name, def string) string {
		if err != nil {
			return ""
		}
		if name == "" {
			name = def
		}
		var p string
		if p, err = exec.LookPath(name); err != nil {
			err = fmt.Errorf("sandbox: %s not found: %w", def, err)
		}
		return p
	}
	m.bwrap = look(m.cfg.Bwrap, "bwrap")
	m.setpriv = look(m.cfg.Setpriv, "setpriv")
	m.prlim = look(m.cfg.Prlimit, "prlimit")
	m.cat = look("", "cat")
	return err
}

// Info describes what the sandbox could set up here, for logs and health output.
type Info struct {
	Cgroup   string   `json:"cgroup"`      // "v2", "v1" or "" (rlimits only)
	Seccomp  bool     `json:"seccomp"`     // boxes run under the system-call filter
	Controls []string `json:"controllers"` // cgroup controllers in use
	IDMapped bool     `json:"idmapped"`    // workspaces are idmapped (else chowned)
}

func (m *Manager) Info() Info {
	i := Info{Cgroup: m.cg.Version(), IDMapped: m.idmap, Seccomp: m.seccomp != ""}
	if m.cg != nil {
		i.Controls = append(i.Controls, m.cg.ctrls...)
	}
	return i
}

// CheckMountable reports whether Box.Mount will work for a directory on another filesystem than
// the state dir's (idmapped mounts are a per-filesystem feature).
func (m *Manager) CheckMountable(dir string) error {
	if !m.idmap {
		return nil
	}
	return m.probeIDMap(dir)
}

// IDMapped reports whether boxes run as uids of their own with idmapped mounts (false: as uid 0
// without capabilities).
func (m *Manager) IDMapped() bool { return m.idmap }

// Close releases every box and undoes the state dir mount and the base cgroups.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	boxes := make([]*Box, 0, len(m.boxes))
	for _, b := range m.boxes {
		boxes = append(boxes, b)
	}
	m.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		if err := b.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	for _, fd := range m.userns {
		_ = unix.Close(fd)
	}
	m.userns = map[int]int{}
	m.mu.Unlock()
	m.cg.close()
	if m.etc != nil {
		m.etc.close()
	}
	if err := unmountAll(m.cfg.StateDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
