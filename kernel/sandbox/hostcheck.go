package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The host checks below are what New relies on, one by one, for `carryover doctor`: each says
// whether one prerequisite holds on this host without setting anything up (no state dir, no
// cgroups), so a failing line can name its own fix.

// MinBwrapVersion is the oldest bubblewrap whose options the boxes use (--size and --perms: 0.5.0).
const MinBwrapVersion = "0.5.0"

var bwrapVersionRE = regexp.MustCompile(`(\d+)\.(\d+)(?:\.(\d+))?`)

// BwrapVersion finds bubblewrap (bwrap: a name on PATH or a path; "" is "bwrap") and returns its
// path and version, or an error when it is missing or older than MinBwrapVersion.
func BwrapVersion(bwrap string) (path, version string, err error) {
	if bwrap == "" {
		bwrap = "bwrap"
	}
	if path, err = exec.LookPath(bwrap); err != nil {
		return "", "", fmt.Errorf("bubblewrap not found: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return path, "", fmt.Errorf("%s --version: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	m := bwrapVersionRE.FindStringSubmatch(string(out))
	if m == nil {
		return path, "", fmt.Errorf("%s --version printed no version: %q", path, strings.TrimSpace(string(out)))
	}
	version = m[0]
	if versionLess(version, MinBwrapVersion) {
		return path, version, fmt.Errorf("bubblewrap %s is older than %s", version, MinBwrapVersion)
	}
	return path, version, nil
}

// versionLess compares dotted numeric versions.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 3; i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// ProbeNamespaces runs `true` in new namespaces of the given CLONE_NEW* flags (user, network...).
func ProbeNamespaces(flags uintptr) error {
	path, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	cmd := exec.Command(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	if flags&syscall.CLONE_NEWUSER != 0 {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("clone(%#x): %w %s", flags, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ProbeIDMapped reports whether dir's filesystem takes idmapped mounts, as New's own probe does:
// a user namespace mapping 0 to uid, a detached clone of dir idmapped to it, dropped unattached.
func ProbeIDMapped(dir string, uid int) error {
	cat, err := exec.LookPath("cat")
	if err != nil {
		return err
	}
	m := &Manager{cat: cat, cfg: Config{UIDBase: uid}, userns: map[int]int{}}
	defer func() {
		for _, fd := range m.userns {
			_ = unix.Close(fd)
		}
	}()
	return m.probeIDMap(dir)
}

// ProbeSeccomp runs `true` under bubblewrap with the boxes' system-call filter loaded.
func ProbeSeccomp(bwrap string) error {
	prog, err := SeccompProgram()
	if err != nil {
		return err
	}
	if bwrap == "" {
		bwrap = "bwrap"
	}
	path, err := exec.LookPath(bwrap)
	if err != nil {
		return fmt.Errorf("bubblewrap not found: %w", err)
	}
	f, err := os.CreateTemp("", "carryover-seccomp-*.bpf")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(prog); err != nil {
		return err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--seccomp", "3", "true"}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.ExtraFiles = []*os.File{f}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bwrap --seccomp ... true: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CgroupHost is what New would find for cgroup limits.
type CgroupHost struct {
	Version     string   // "v2", "v1" or ""
	Dir         string   // the server's own group (v2) or the memory controller's (v1)
	Controllers []string // of memory, pids, cpu: those available
	Writable    bool     // the server may create groups there
}

// ProbeCgroups reads which of the controllers boxes use (memory, pids, cpu) this process could
// delegate, v2 first as New does, without creating any group.
func ProbeCgroups() (CgroupHost, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return CgroupHost{}, err
	}
	own, err := ownCgroups()
	if err != nil {
		return CgroupHost{}, err
	}
	for _, m := range mounts {
		if m.fstype != "cgroup2" {
			continue
		}
		path, ok := own[""]
		if !ok {
			break
		}
		dir := filepath.Join(m.point, path)
		avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			break
		}
		h := CgroupHost{Version: "v2", Dir: dir, Writable: unix.Access(dir, unix.W_OK) == nil}
		for _, c := range controllers {
			if contains(strings.Fields(string(avail)), c) {
				h.Controllers = append(h.Controllers, c)
			}
		}
		if contains(h.Controllers, "memory") {
			return h, nil
		}
	}
	h := CgroupHost{Version: "v1"}
	for _, ctrl := range controllers {
		for _, m := range mounts {
			if m.fstype == "cgroup" && contains(m.opts, ctrl) {
				if path, ok := own[ctrl]; ok {
					dir := filepath.Join(m.point, path)
					if h.Dir == "" {
						h.Dir, h.Writable = dir, unix.Access(dir, unix.W_OK) == nil
					}
					h.Controllers = append(h.Controllers, ctrl)
				}
				break
			}
		}
	}
	if len(h.Controllers) == 0 {
		return CgroupHost{}, errors.New("no memory, pids or cpu controller mounted (v1 or v2)")
	}
	return h, nil
}
