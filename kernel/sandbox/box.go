package sandbox

// box.go holds one box's life: made with its uid, dir and cgroup (NewBox), its mounts and
// limits, killed and released.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

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
	etcDirs  []string          // the /etc copies its commands bind (etc.go), released with it
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
	etcDirs := b.etcDirs
	b.etcDirs = nil
	b.mu.Unlock()
	for _, d := range etcDirs { // its processes are gone (kill): nothing binds them for it any more
		b.m.etc.release(d)
	}
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
