package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cgroups. Each box gets its own group under a base group that is a child of the server's OWN
// cgroup, so sandboxes stay inside whatever the server itself is confined to (a systemd slice, a
// container). cgroup v2 is used when its hierarchy has the memory controller; otherwise the v1
// controllers (memory, pids, cpu) where they are mounted, which is what hybrid hosts such as the CI
// machine have. A process joins its box's group before it execs bubblewrap (see Box.Command), so
// nothing it forks can escape the accounting.

// controllers used, in order of importance.
var controllers = []string{"memory", "pids", "cpu"}

type cgroups struct {
	v2    bool
	base  map[string]string // controller -> base dir; v2: the same dir for every controller
	ctrls []string          // controllers available, a subset of controllers
	log   *slog.Logger
}

type cgroup struct {
	root *cgroups
	dirs map[string]string // controller -> group dir
	ev   eventFiles        // its limit-hit counters, held open (cgroup_events.go)
}

// Version says which hierarchy is used: "v2", "v1" or "" (none).
func (c *cgroups) Version() string {
	switch {
	case c == nil:
		return ""
	case c.v2:
		return "v2"
	default:
		return "v1"
	}
}

type mountEntry struct {
	point  string
	fstype string
	source string // e.g. /dev/loop3
	opts   []string
}

func readMountInfo() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f1, f2 := strings.Fields(pre), strings.Fields(post)
		if len(f1) < 5 || len(f2) < 3 {
			continue
		}
		out = append(out, mountEntry{point: UnescapeMount(f1[4]), fstype: f2[0], source: UnescapeMount(f2[1]), opts: strings.Split(f2[2], ",")})
	}
	return out, sc.Err()
}

// UnescapeMount undoes the octal escapes (\040 for a space, ...) of /proc/self/mountinfo: a mount
// point under a directory with a space in its path is still found (here, and by the test servers'
// and the bench's clean-ups of what a killed server left mounted).
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups reads /proc/self/cgroup: controller -> path ("" -> the v2 path).
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

func writeFile(path, val string) error {
	return os.WriteFile(path, []byte(val), 0o644)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// detectCgroups sets up the base groups; it returns nil (and logs why) when no usable controller
// can be delegated to us, in which case the rlimit fallbacks apply.
func detectCgroups(name string, log *slog.Logger) *cgroups {
	mounts, err := readMountInfo()
	if err != nil {
		log.Warn("sandbox: cgroups: reading mountinfo", "err", err)
		return nil
	}
	own, err := ownCgroups()
	if err != nil {
		log.Warn("sandbox: cgroups: reading /proc/self/cgroup", "err", err)
		return nil
	}
	if c, err := setupV2(mounts, own, name, log); c != nil {
		return c
	} else if err != nil {
		log.Debug("sandbox: cgroup v2 not usable, trying v1", "err", err)
	}
	c, err := setupV1(mounts, own, name, log)
	if err != nil {
		log.Warn("sandbox: no usable cgroup controllers; memory falls back to RLIMIT_AS, processes to RLIMIT_NPROC, no CPU limit", "err", err)
		return nil
	}
	return c
}

func setupV2(mounts []mountEntry, own map[string]string, name string, log *slog.Logger) (*cgroups, error) {
	var mnt string
	for _, m := range mounts {
		if m.fstype == "cgroup2" {
			mnt = m.point
		}
	}
	path, ok := own[""]
	if mnt == "" || !ok {
		return nil, nil
	}
	dir := filepath.Join(mnt, path)
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	have := strings.Fields(string(avail))
	if !contains(have, "memory") {
		return nil, fmt.Errorf("%s has no memory controller (controllers: %q)", dir, have)
	}
	var ctrls []string
	var enable []string
	for _, c := range controllers {
		if contains(have, c) {
			ctrls = append(ctrls, c)
			enable = append(enable, "+"+c)
		}
	}
	en := strings.Join(enable, " ")
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), en); err != nil {
		// "No internal processes": a non-root group with processes cannot hand controllers down.
		// Move ourselves into a leaf beside the sandboxes, as container runtimes do.
		if !errors.Is(err, syscall.EBUSY) {
			return nil, fmt.Errorf("enabling %s in %s: %w", en, dir, err)
		}
		leaf := filepath.Join(dir, "carryover-server")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
			return nil, fmt.Errorf("moving the server into %s: %w", leaf, err)
		}
		log.Info("sandbox: moved the server into a leaf cgroup to delegate controllers", "cgroup", leaf)
		if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), en); err != nil {
			return nil, fmt.Errorf("enabling %s in %s: %w", en, dir, err)
		}
	}
	sweepStale(dir)
	base := filepath.Join(dir, name)
	if err := os.Mkdir(base, 0o755); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(base, "cgroup.subtree_control"), en); err != nil {
		_ = os.Remove(base)
		return nil, fmt.Errorf("enabling %s in %s: %w", en, base, err)
	}
	return &cgroups{v2: true, base: map[string]string{"": base}, ctrls: ctrls, log: log}, nil
}

func setupV1(mounts []mountEntry, own map[string]string, name string, log *slog.Logger) (*cgroups, error) {
	c := &cgroups{base: map[string]string{}, log: log}
	var errs []error
	for _, ctrl := range controllers {
		var mnt string
		for _, m := range mounts {
			if m.fstype == "cgroup" && contains(m.opts, ctrl) {
				mnt = m.point
				break
			}
		}
		path, ok := own[ctrl]
		if mnt == "" || !ok {
			continue
		}
		parent := filepath.Join(mnt, path)
		sweepStale(parent)
		base := filepath.Join(parent, name)
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			errs = append(errs, fmt.Errorf("%s: %w", ctrl, err))
			continue
		}
		c.base[ctrl] = base
		c.ctrls = append(c.ctrls, ctrl)
	}
	if len(c.ctrls) == 0 {
		if len(errs) == 0 {
			errs = append(errs, errors.New("no memory, pids or cpu controller mounted"))
		}
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// sweepStale removes the (empty) base groups of carryover servers that are no longer running.
func sweepStale(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		pidStr, ok := strings.CutPrefix(e.Name(), "carryover-")
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ = strings.Cut(pidStr, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		subs, _ := os.ReadDir(dir)
		for _, s := range subs {
			if s.IsDir() {
				_ = os.Remove(filepath.Join(dir, s.Name()))
			}
		}
		_ = os.Remove(dir)
	}
}

// create makes the group of one box.
func (c *cgroups) create(name string) (*cgroup, error) {
	g := &cgroup{root: c, dirs: map[string]string{}}
	for ctrl, base := range c.base {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			g.remove()
			return nil, fmt.Errorf("cgroup %s: %w", dir, err)
		}
		g.dirs[ctrl] = dir
	}
	return g, nil
}

// procsFiles are the cgroup.procs files a process writes its pid into to join the group.
func (g *cgroup) procsFiles() []string {
	var out []string
	for _, d := range g.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

func (g *cgroup) dir(ctrl string) (string, bool) {
	if g.root.v2 {
		d, ok := g.dirs[""]
		return d, ok && contains(g.root.ctrls, ctrl)
	}
	d, ok := g.dirs[ctrl]
	return d, ok
}

// memoryCharged is the memory the cgroup is charged for (v2 memory.current, v1
// memory.usage_in_bytes: the pages its processes wrote or first read, page cache and tmpfs
// included); 0 without the memory controller or when it cannot be read.
func (g *cgroup) memoryCharged() int64 {
	d, ok := g.dir("memory")
	if !ok {
		return 0
	}
	name := "memory.usage_in_bytes"
	if g.root.v2 {
		name = "memory.current"
	}
	b, err := os.ReadFile(filepath.Join(d, name))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// has reports whether the controller is in use.
func (g *cgroup) has(ctrl string) bool { _, ok := g.dir(ctrl); return ok }

// set applies limits (0 = none).
func (g *cgroup) set(l Limits) error {
	var errs []error
	w := func(dir, file, val string) {
		if err := writeFile(filepath.Join(dir, file), val); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %w", file, val, err))
		}
	}
	if d, ok := g.dir("memory"); ok {
		if g.root.v2 {
			if l.MemoryBytes > 0 {
				w(d, "memory.max", strconv.FormatInt(l.MemoryBytes, 10))
				_ = writeFile(filepath.Join(d, "memory.swap.max"), "0")
			} else {
				w(d, "memory.max", "max")
			}
			// An OOM kills the whole sandbox, not a random thread of it: the kernel is restored anyway.
			_ = writeFile(filepath.Join(d, "memory.oom.group"), "1")
		} else {
			// memsw must stay >= the memory limit, so open it first and close it after.
			_ = writeFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), "-1")
			if l.MemoryBytes > 0 {
				v := strconv.FormatInt(l.MemoryBytes, 10)
				w(d, "memory.limit_in_bytes", v)
				_ = writeFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), v)
			} else {
				w(d, "memory.limit_in_bytes", "-1")
			}
		}
	}
	if d, ok := g.dir("pids"); ok {
		v := "max"
		if l.Pids > 0 {
			v = strconv.Itoa(l.Pids)
		}
		w(d, "pids.max", v)
	}
	if d, ok := g.dir("cpu"); ok {
		const period = 100000
		quota := -1
		if l.CPUs > 0 {
			quota = max(int(l.CPUs*period), 1000)
		}
		if g.root.v2 {
			v := "max " + strconv.Itoa(period)
			if quota > 0 {
				v = strconv.Itoa(quota) + " " + strconv.Itoa(period)
			}
			w(d, "cpu.max", v)
		} else {
			w(d, "cpu.cfs_period_us", strconv.Itoa(period))
			w(d, "cpu.cfs_quota_us", strconv.Itoa(quota))
		}
	}
	return errors.Join(errs...)
}

// pids lists the processes in the group.
func (g *cgroup) pids() []int {
	for _, d := range g.dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		var out []int
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

// kill SIGKILLs everything in the group until it is empty (or 3 s passed): a fork bomb cannot outrun
// it because the pids limit bounds what it can make between two sweeps.
func (g *cgroup) kill() {
	if g.root.v2 {
		_ = writeFile(filepath.Join(g.dirs[""], "cgroup.kill"), "1")
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		pids := g.pids()
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// remove deletes the group's dirs; processes still dying hold them for a moment, so it retries.
func (g *cgroup) remove() error {
	g.ev.close()
	var errs []error
	for _, d := range g.dirs {
		var err error
		for i := 0; i < 100; i++ {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close removes the base groups (the boxes' groups must be gone).
func (c *cgroups) close() {
	if c == nil {
		return
	}
	for _, b := range c.base {
		_ = os.Remove(b)
	}
}
