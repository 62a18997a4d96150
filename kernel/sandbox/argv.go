package sandbox

// argv.go builds the command line that runs a command in a box: the wrapper that opens the
// seccomp filter and joins the cgroups, prlimit, bubblewrap's arguments, setpriv.

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

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
	a = append(a, envArgs(b.boxEnv(c.Env))...)
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

// boxEnv is the whole environment of a box's command whose own is extra: PATH (unless extra sets
// it), extra, and the egress proxy's variables.
func (b *Box) boxEnv(extra map[string]string) map[string]string {
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}
	for k, v := range b.proxyEnv(extra) {
		env[k] = v
	}
	return env
}

// envArgs clear the environment and set env, in a stable order.
func envArgs(env map[string]string) []string {
	a := []string{"--clearenv"}
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
type parentDirs struct {
	made map[string]bool
	ro   []string // read-only trees whose dirs are there already (the /etc copy's)
}

func newParentDirs() *parentDirs {
	return &parentDirs{made: map[string]bool{"/": true, "/tmp": true, "/dev": true, "/proc": true, "/var": true}}
}

// args returns the --dir arguments for dst's missing parents, outermost first.
func (p *parentDirs) args(dst string) []string {
	var chain []string
	for d := filepath.Dir(dst); !p.made[d] && !p.inReadOnly(d); d = filepath.Dir(d) {
		chain = append(chain, d)
		p.made[d] = true
	}
	var a []string
	for i := len(chain) - 1; i >= 0; i-- {
		a = append(a, "--perms", "0755", "--dir", chain[i])
	}
	return a
}

// readOnly marks dir as a read-only tree holding its own dirs: no --dir is made under it.
func (p *parentDirs) readOnly(dir string) {
	p.ro = append(p.ro, dir)
}

func (p *parentDirs) inReadOnly(d string) bool {
	for _, r := range p.ro {
		if d == r || strings.HasPrefix(d, r+"/") {
			return true
		}
	}
	return false
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
	a = append(a, b.etcArgs(p)...)
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

// etcArgs bind the /etc allowlist: its copy at once (etc.go; the box holds it until its release),
// else entry by entry.
func (b *Box) etcArgs(p *parentDirs) []string {
	m := b.m
	if m.etc != nil {
		dir, err := m.etc.acquire(time.Now())
		if err == nil {
			b.mu.Lock()
			b.etcDirs = append(b.etcDirs, dir)
			b.mu.Unlock()
			p.readOnly("/etc")
			return []string{"--ro-bind", dir, "/etc"}
		}
		m.etc.fallback(m.log, err)
	}
	var a []string
	for _, e := range m.cfg.Etc {
		e = filepath.Clean("/etc/" + e)
		if _, err := os.Stat(e); err == nil && strings.HasPrefix(e, "/etc/") {
			a = append(a, p.args(e)...)
			a = append(a, "--ro-bind", e, e)
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
		if n != "workspace" && n != "skills" && n != tmpMount && !strings.HasPrefix(n, runtimeMount+"/") {
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
