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
	"sort"
	"strconv"
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
	idmap                 bool   // boxes get their own uid and idmapped mounts (else: uid 0, no caps)
	seccomp               string // the filter program's file, read by bubblewrap on fd 3 ("" for none)
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StateDir == "" {
		return nil, errors.New("sandbox: StateDir is required")
	}
	if cfg.UIDBase <= 0 {
		cfg.UIDBase = 200000
	}
	if cfg.UIDCount <= 0 {
		cfg.UIDCount = 10000
	}
	if cfg.Etc == nil {
		cfg.Etc = DefaultEtc
	}
	if cfg.TmpSize == 0 {
		cfg.TmpSize = 1 << 30
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("sandbox: the server is not root: per-session uids and workspace mounts need root")
	}
	if err := Probe(cfg.Bwrap); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if cfg.LockDir == "" {
		cfg.LockDir = "/run/carryover-sandbox-uids"
		if unix.Access("/run", unix.W_OK) != nil {
			cfg.LockDir = filepath.Join(os.TempDir(), "carryover-sandbox-uids")
		}
	}
	if err := os.MkdirAll(cfg.LockDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: uid lock dir: %w", err)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, uids: map[int]*os.File{}, userns: map[int]int{}, boxes: map[string]*Box{}}
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
	m.bwrap = look(cfg.Bwrap, "bwrap")
	m.setpriv = look(cfg.Setpriv, "setpriv")
	m.prlim = look(cfg.Prlimit, "prlimit")
	m.cat = look("", "cat")
	if err != nil {
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
	if err := unmountAll(m.cfg.StateDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// allocUID takes a free uid of the range (next-fit, so a just-released uid is reused last).
// A uid is ours while we hold an flock on its lock file: other carryover servers on the host (or
// other Managers in this process) skip it, and a crashed server's locks vanish with it.
func (m *Manager) allocUID() (int, error) {
	for i := 0; i < m.cfg.UIDCount; i++ {
		off := (m.next + i) % m.cfg.UIDCount
		uid := m.cfg.UIDBase + off
		if m.uids[uid] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(m.cfg.LockDir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return 0, fmt.Errorf("sandbox: uid lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue // another server's
		}
		m.uids[uid] = f
		m.next = off + 1
		return uid, nil
	}
	return 0, fmt.Errorf("sandbox: all %d sandbox uids are in use", m.cfg.UIDCount)
}

func (m *Manager) freeUID(uid int) {
	if f := m.uids[uid]; f != nil {
		f.Close() // drops the flock
	}
	delete(m.uids, uid)
	// Mounts hold their own reference to the idmap; the cached namespace fd is only for new mounts.
	if fd, ok := m.userns[uid]; ok {
		_ = unix.Close(fd)
		delete(m.userns, uid)
	}
}

// BoxOptions describe a new box.
type BoxOptions struct {
	Name    string // unique among live boxes; short ([A-Za-z0-9_.-]); used for dirs and cgroups
	Network bool   // keep the host's network namespace
	Limits  Limits // initial limits (SetLimits changes them later)
	// Allow, when not nil and Network is false, is an egress allowlist (egress.go): the box gets a
	// namespace of its own whose only way out is a filtering HTTP(S) proxy the server runs.
	Allow []string
}

// Box is one sandbox: a kernel (with restarts) or one shell command.
type Box struct {
	m       *Manager
	name    string
	dir     string
	uid     int
	ownUID  bool
	network bool
	cg      *cgroup
	ns      *netns // the namespace made for an egress allowlist (nil: bubblewrap makes one, or none)
	proxy   *Proxy

	mu       sync.Mutex
	limits   Limits
	mounts   map[string]string // mount point name in the box dir -> host dir mounted there
	released bool
}

var nameOK = func(s string) bool {
	if s == "" || len(s) > 64 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// NewBox prepares a box: uid, dir with mount point and passwd/group, cgroup with the limits.
func (m *Manager) NewBox(o BoxOptions) (*Box, error) {
	if !nameOK(o.Name) {
		return nil, fmt.Errorf("sandbox: bad box name %q", o.Name)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("sandbox: manager is closed")
	}
	if _, dup := m.boxes[o.Name]; dup {
		m.mu.Unlock()
		return nil, fmt.Errorf("sandbox: box %q exists", o.Name)
	}
	b := &Box{m: m, name: o.Name, dir: filepath.Join(m.cfg.StateDir, o.Name), network: o.Network, limits: o.Limits,
		mounts: map[string]string{}}
	if m.idmap {
		uid, err := m.allocUID()
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		b.uid, b.ownUID = uid, true
	}
	m.boxes[o.Name] = b
	m.mu.Unlock()
	if o.Allow != nil && !o.Network {
		if err := b.setupEgress(o.Allow); err != nil {
			_ = b.Release()
			return nil, err
		}
	}
	if err := b.setup(); err != nil {
		_ = b.Release()
		return nil, err
	}
	return b, nil
}

func (b *Box) setup() error {
	for _, d := range []string{"workspace", "skills"} {
		if err := os.MkdirAll(filepath.Join(b.dir, d), 0o755); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if err := b.mountTmp(); err != nil {
		return err
	}
	u := strconv.Itoa(b.uid)
	passwd := "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:" + u + ":" + u + ":carryover sandbox:/tmp:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group := "root:x:0:\nsandbox:x:" + u + ":\nnogroup:x:65534:\n"
	if err := os.WriteFile(filepath.Join(b.dir, "passwd"), []byte(passwd), 0o644); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "group"), []byte(group), 0o644); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if b.m.cg != nil {
		g, err := b.m.cg.create(b.name)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		b.cg = g
		if err := g.set(b.limits); err != nil {
			return fmt.Errorf("sandbox: limits: %w", err)
		}
	}
	return nil
}

// Name, UID and Network describe the box.
func (b *Box) Name() string  { return b.name }
func (b *Box) UID() int      { return b.uid }
func (b *Box) Network() bool { return b.network }

// Limits returns the limits in force.
func (b *Box) Limits() Limits {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limits
}

// Bind is an extra read-write bind mount.
type Bind struct {
	Src, Dst string
}

// Command is what to run in a box.
type Command struct {
	Argv  []string
	Dir   string            // cwd inside; default /workspace
	Env   map[string]string // the whole environment (nothing else is passed); PATH defaults
	Binds []Bind            // extra read-write binds (kernel runtime dir, spool dir)
}

// Command returns the argv that runs c in the box: a /bin/sh that joins the box's cgroups, then
// prlimit (RLIMIT_NPROC, RLIMIT_CORE=0, and RLIMIT_AS when memory is not a cgroup), then bwrap, then
// setpriv down to the box uid, then c.Argv.
func (b *Box) Command(c Command) []string {
	b.mu.Lock()
	lim := b.limits
	b.mu.Unlock()
	m := b.m
	argv := b.wrapper()
	argv = append(argv, m.prlim, "--core=0")
	if lim.Pids > 0 {
		argv = append(argv, "--nproc="+strconv.Itoa(lim.Pids))
	}
	if lim.MemoryBytes > 0 && (b.cg == nil || !b.cg.has("memory")) {
		argv = append(argv, "--as="+strconv.FormatInt(lim.MemoryBytes, 10))
	}
	argv = append(argv, "--", m.bwrap)
	argv = append(argv, b.bwrapArgs(c)...)
	argv = append(argv, "--")
	if b.ownUID {
		argv = append(argv, m.setpriv, "--reuid="+strconv.Itoa(b.uid), "--regid="+strconv.Itoa(b.uid),
			"--clear-groups", "--bounding-set=-all", "--inh-caps=-all", "--")
	}
	return append(argv, c.Argv...)
}

// wrapper is the /bin/sh that opens the seccomp filter on fd 3 (for bubblewrap's --seccomp 3) and
// joins the box's cgroups before it execs the rest; nil when there is neither.
func (b *Box) wrapper() []string {
	var script string
	var args []string
	if b.m.seccomp != "" {
		script = `exec 3<"$1" || exit 126; shift; `
		args = append(args, b.m.seccomp)
	}
	if b.cg != nil {
		script += `while [ "$1" != -- ]; do echo $$ >"$1" || exit 126; shift; done; shift; `
		args = append(append(args, b.cg.procsFiles()...), "--")
	}
	if script == "" {
		return nil
	}
	return append([]string{"/bin/sh", "-c", script + `exec "$@"`, "carryover-sandbox"}, args...)
}

func (b *Box) bwrapArgs(c Command) []string {
	a := b.isolationArgs()
	if b.m.seccomp != "" {
		a = append(a, "--seccomp", "3")
	}
	a = append(a, envArgs(b.proxyEnv(c.Env))...)
	p := newParentDirs()
	a = append(a, b.systemArgs(p)...)
	a = append(a, b.devTmpArgs()...)
	a = append(a, b.bindArgs(c, p)...)
	dir := c.Dir
	if dir == "" {
		dir = "/workspace"
	}
	return append(a, "--chdir", dir)
}

// isolationArgs are the namespaces and capabilities of the box.
func (b *Box) isolationArgs() []string {
	a := []string{"--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "sandbox"}
	if !b.network && b.ns == nil {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--cap-drop", "ALL")
	if b.ownUID {
		// Only what setpriv needs to switch to the box uid; it empties the bounding set itself.
		a = append(a, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP")
	}
	return a
}

// envArgs clear the environment and set PATH plus env, in a stable order.
func envArgs(extra map[string]string) []string {
	a := []string{"--clearenv"}
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}
	for k, v := range extra {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a = append(a, "--setenv", k, env[k])
	}
	return a
}

// parentDirs makes the missing parents of mount points 0755 before they are mounted on:
// bubblewrap makes them 0700 (root's), and the box uid could not reach what is bound below them.
type parentDirs struct{ made map[string]bool }

func newParentDirs() *parentDirs {
	return &parentDirs{made: map[string]bool{"/": true, "/tmp": true, "/dev": true, "/proc": true, "/var": true}}
}

// args returns the --dir arguments for dst's missing parents, outermost first.
func (p *parentDirs) args(dst string) []string {
	var chain []string
	for d := filepath.Dir(dst); !p.made[d]; d = filepath.Dir(d) {
		chain = append(chain, d)
		p.made[d] = true
	}
	var a []string
	for i := len(chain) - 1; i >= 0; i-- {
		a = append(a, "--perms", "0755", "--dir", chain[i])
	}
	return a
}

// systemArgs bind the read-only system: /usr, the /bin, /sbin, /lib* links or dirs, the /etc
// allowlist, the box's passwd and group, and the configured extra read-only binds.
func (b *Box) systemArgs(p *parentDirs) []string {
	a := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", t, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, e := range b.m.cfg.Etc {
		e = filepath.Clean("/etc/" + e)
		if _, err := os.Stat(e); err == nil && strings.HasPrefix(e, "/etc/") {
			a = append(a, p.args(e)...)
			a = append(a, "--ro-bind", e, e)
		}
	}
	a = append(a, p.args("/etc/passwd")...)
	a = append(a, "--ro-bind", filepath.Join(b.dir, "passwd"), "/etc/passwd",
		"--ro-bind", filepath.Join(b.dir, "group"), "/etc/group")
	for _, rb := range b.m.cfg.ROBinds {
		if _, err := os.Stat(rb); err == nil && filepath.IsAbs(rb) {
			a = append(a, p.args(rb)...)
			a = append(a, "--ro-bind", rb, rb)
		}
	}
	return a
}

// devTmpArgs give the box its own /proc, /dev, /dev/shm, /tmp and /var/tmp.
func (b *Box) devTmpArgs() []string {
	// --dev gives the box its own /dev: the usual nodes, fd/stdin/stdout/stderr links and a private
	// devpts instance (newinstance, ptmx 0666), so pexpect can open ptys for IPython's !cmd, %pip and
	// %%bash without seeing the host's terminals. /dev/tty is there too, but --new-session (setsid)
	// leaves the box without a controlling terminal, so opening it fails with ENXIO and no TIOCSTI
	// can reach the server's terminal.
	size := strconv.FormatInt(b.m.cfg.TmpSize, 10)
	return []string{"--proc", "/proc", "--dev", "/dev", "--new-session",
		"--perms", "1777", "--size", size, "--tmpfs", "/dev/shm",
		"--bind", filepath.Join(b.dir, tmpMount), "/tmp",
		"--perms", "0755", "--dir", "/var", "--symlink", "/tmp", "/var/tmp"}
}

// bindArgs bind the command's own binds, the box's named mounts under /run/carryover, and the
// workspace mount point at /workspace.
func (b *Box) bindArgs(c Command, p *parentDirs) []string {
	var a []string
	for _, bd := range c.Binds {
		a = append(a, p.args(bd.Dst)...)
		a = append(a, "--bind", bd.Src, bd.Dst)
	}
	b.mu.Lock()
	names := make([]string, 0, len(b.mounts))
	for n := range b.mounts {
		if n != "workspace" && n != "skills" && n != tmpMount {
			names = append(names, n)
		}
	}
	b.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		a = append(a, p.args(MountTarget(n))...)
		a = append(a, "--bind", filepath.Join(b.dir, n), MountTarget(n))
	}
	a = append(a, "--bind", filepath.Join(b.dir, "skills"), SkillsPath)
	return append(a, "--bind", filepath.Join(b.dir, "workspace"), "/workspace")
}

// MountTarget is where a box mount named name appears inside: /workspace for "workspace", else
// /run/carryover/<name>.
func MountTarget(name string) string {
	if name == "workspace" {
		return "/workspace"
	}
	if name == "skills" {
		return SkillsPath
	}
	return "/run/carryover/" + name
}

// Mount puts the host dir src at MountTarget(name) inside the box, idmapped to the box uid. Mounts
// made before a Command starts are bound by it; "workspace" may also be (re)mounted while the box
// runs (it propagates, see Attach). Mounting the dir already mounted there is a no-op.
func (b *Box) Mount(name, src string) error {
	if !nameOK(name) {
		return fmt.Errorf("sandbox: bad mount name %q", name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released {
		return errors.New("sandbox: box is released")
	}
	if b.mounts[name] == src {
		return nil
	}
	target := filepath.Join(b.dir, name)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if b.mounts[name] != "" {
		if err := unmountAll(target); err != nil {
			return err
		}
		delete(b.mounts, name)
	}
	if err := b.m.mountAt(src, target, b.uid); err != nil {
		return fmt.Errorf("sandbox: mount %s: %w", src, err)
	}
	b.mounts[name] = src
	return nil
}

// Attach mounts the host directory ws at the box's /workspace. On a running box it propagates into
// the sandbox (the warm pool's claim); attaching another dir replaces the first.
func (b *Box) Attach(ws string) error { return b.Mount("workspace", ws) }

// Attached is the host dir at /workspace ("" for none).
func (b *Box) Attached() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mounts["workspace"]
}

// SetLimits changes the limits of a box whose processes may be running: the cgroup files, and
// without a memory cgroup RLIMIT_AS of each of its processes (that needs CAP_SYS_RESOURCE).
// RLIMIT_NPROC stays what the box started with.
func (b *Box) SetLimits(l Limits) error {
	b.mu.Lock()
	b.limits = l
	b.mu.Unlock()
	var errs []error
	if b.cg != nil {
		errs = append(errs, b.cg.set(l))
	}
	memRlimit := l.MemoryBytes > 0 && (b.cg == nil || !b.cg.has("memory"))
	for _, pid := range b.processes() {
		if memRlimit {
			lim := unix.Rlimit{Cur: uint64(l.MemoryBytes), Max: uint64(l.MemoryBytes)}
			if err := unix.Prlimit(pid, unix.RLIMIT_AS, &lim, nil); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("RLIMIT_AS of %d: %w", pid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// processes lists the box's processes that run as its uid (the sandboxed ones; bubblewrap's own
// two processes run as root outside the cgroup's limits' concern).
func (b *Box) processes() []int {
	if b.cg != nil {
		var out []int
		for _, p := range b.cg.pids() {
			if procUID(p) == b.uid {
				out = append(out, p)
			}
		}
		return out
	}
	if !b.ownUID {
		return nil // uid 0 is everybody's: without a cgroup there is no telling the box's apart
	}
	return pidsOfUID(b.uid)
}

// KillStrays SIGKILLs every sandboxed process of the box except the first one (the process
// bubblewrap started: the kernel), and returns how many it killed. After a fork bomb this leaves the
// kernel with its state and frees the process limit. leader is the pid of the box's command (the
// wrapper that became bubblewrap); bubblewrap's own processes run as root and are spared.
//
// With a pids cgroup the kernel is also made to stop forking: forks are refused (pids.max=1) and the
// kernel is paused while the strays die, then resumed with forks still refused until it has tried
// one (a `while True: os.fork()` then raises BlockingIOError) or half a second passed.
func (b *Box) KillStrays(leader int) int {
	if b.isReleased() {
		return 0
	}
	top := b.topProcess(leader)
	if d, ok := b.cgDir("pids"); ok {
		_ = writeFile(filepath.Join(d, "pids.max"), "1")
		defer func() {
			v := "max"
			if l := b.Limits(); l.Pids > 0 {
				v = strconv.Itoa(l.Pids)
			}
			_ = writeFile(filepath.Join(d, "pids.max"), v)
		}()
		if top != 0 {
			_ = unix.Kill(top, unix.SIGSTOP)
			defer func() {
				before := b.Events().PidsMax
				_ = unix.Kill(top, unix.SIGCONT)
				for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && b.Events().PidsMax == before; {
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
	}
	killed := map[int]bool{}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n := 0
		for _, p := range b.processes() {
			if p == top || p == leader {
				continue
			}
			st, ok := procStat(p)
			if !ok || st.state == 'Z' || st.state == 'X' {
				continue // dead already, waiting for its parent (or init) to reap it
			}
			if b.ownUID || st.ppid != leader { // uid 0 boxes: spare bwrap's init (child of the leader)
				if unix.Kill(p, unix.SIGKILL) == nil && !killed[p] {
					killed[p] = true
					n++
				}
			}
		}
		if n == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return len(killed)
}

// cgDir is the box's group dir of a controller in use.
func (b *Box) cgDir(ctrl string) (string, bool) {
	if b.cg == nil {
		return "", false
	}
	return b.cg.dir(ctrl)
}

// topProcess is the first sandboxed process: the oldest child of bubblewrap's init, itself the
// leader's child (orphans of a fork bomb are reparented to init too, hence "oldest"). 0 when gone.
func (b *Box) topProcess(leader int) int {
	procs := scanProcs()
	var init int
	for _, p := range procs {
		if p.ppid == leader {
			init = p.pid
		}
	}
	top, start := 0, uint64(0)
	for _, p := range procs {
		if init != 0 && p.ppid == init && (top == 0 || p.start < start) {
			top, start = p.pid, p.start
		}
	}
	return top
}

type procInfo struct {
	pid, ppid int
	state     byte   // R, S, D, Z (zombie), ...
	start     uint64 // clock ticks after boot
}

// parseStat reads pid, ppid and start time from a /proc/<pid>/stat line.
func parseStat(s string) (procInfo, bool) {
	var p procInfo
	i := strings.IndexByte(s, ' ')
	j := strings.LastIndexByte(s, ')')
	if i < 0 || j < 0 {
		return p, false
	}
	p.pid, _ = strconv.Atoi(s[:i])
	f := strings.Fields(s[j+1:])
	if len(f) < 20 {
		return p, false
	}
	p.state = f[0][0]
	p.ppid, _ = strconv.Atoi(f[1])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	return p, true
}

func scanProcs() []procInfo {
	entries, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseStat(string(b)); ok {
			out = append(out, p)
		}
	}
	return out
}

// procStat reads /proc/<pid>/stat (ok false when gone).
func procStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(string(b))
}

// Events counts limit hits (cgroups only; zero without).
func (b *Box) Events() Events {
	if b.cg == nil {
		return Events{}
	}
	return b.cg.events()
}

// Kill SIGKILLs every process of the box. bubblewrap's init then exits and the kernel sees its
// process die.
func (b *Box) Kill() {
	if b.isReleased() {
		return // its uid may belong to another box by now
	}
	b.kill()
}

// isReleased reports whether Release ran: then the box's uid and cgroup are no longer its own.
func (b *Box) isReleased() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.released
}

// kill SIGKILLs every process of the box's cgroup and uid.
func (b *Box) kill() {
	if b.cg != nil {
		b.cg.kill()
	}
	if b.ownUID {
		for i := 0; i < 50; i++ {
			pids := pidsOfUID(b.uid)
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				_ = unix.Kill(p, unix.SIGKILL)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// Release kills what is left, unmounts the workspace, removes the cgroup and the box dir, and frees
// the uid. Idempotent.
func (b *Box) Release() error {
	b.mu.Lock()
	if b.released {
		b.mu.Unlock()
		return nil
	}
	b.released = true
	b.mu.Unlock()
	b.kill()
	var errs []error
	b.mu.Lock()
	for n := range b.mounts {
		if err := unmountAll(filepath.Join(b.dir, n)); err != nil {
			errs = append(errs, err)
		}
	}
	b.mounts = map[string]string{}
	b.mu.Unlock()
	if b.cg != nil {
		if err := b.cg.remove(); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: cgroup of %s: %w", b.name, err))
		}
	}
	if b.proxy != nil {
		_ = b.proxy.Close()
	}
	_ = b.ns.close()
	removeBoxDir(b.dir)
	m := b.m
	m.mu.Lock()
	if b.ownUID {
		m.freeUID(b.uid)
	}
	delete(m.boxes, b.name)
	m.mu.Unlock()
	return errors.Join(errs...)
}

// procUID is the real uid of pid (-1 when gone).
func procUID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return -1
}

// pidsOfUID scans /proc for the processes whose real uid is uid.
func pidsOfUID(uid int) []int {
	return pidsByUID(func(u int) bool { return u == uid })[uid]
}

// pidsByUID scans /proc once for the processes whose real uid is one of want's, by uid.
func pidsByUID(want func(uid int) bool) map[int][]int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		// /proc/<pid> is owned by the process's effective uid; confirm with the real uid.
		if unix.Stat("/proc/"+e.Name(), &st) != nil || !want(int(st.Uid)) {
			continue
		}
		if uid := procUID(pid); want(uid) {
			out[uid] = append(out[uid], pid)
		}
	}
	return out
}
