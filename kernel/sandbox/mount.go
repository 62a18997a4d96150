package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mounts. The state dir is bind-mounted onto itself and made a shared mount in its own peer group.
// A sandbox binds its box's mount point (<state>/<box>/workspace) at /workspace; bubblewrap turns
// every mount of the sandbox into a slave of the host's, so a mount the server later puts ON that
// mount point propagates into the running sandbox. That is how a warm kernel, started before anyone
// knew its session, gets the session's workspace at claim time in ~0.1 ms.
//
// The workspace (and the checkpoint spool) is attached as an idmapped mount (Linux >= 5.12 on
// ext4/xfs/btrfs, tmpfs >= 6.3): files owned by root on disk (the server writes them: uploads,
// restored files, restore spool files) appear owned by the sandbox uid inside, and what the sandbox
// creates lands as root on disk. No chown ever runs, the server keeps ownership of every file, and
// the box uid can change from one kernel to the next. Where idmapped mounts are refused, boxes run
// as uid 0 without capabilities instead (Manager.IDMapped reports which; see New).

// isMountPoint reports whether path is the mount point of some mount.
func isMountPoint(path string) (bool, error) {
	ms, err := readMountInfo()
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.point == path {
			return true, nil
		}
	}
	return false, nil
}

// mountsUnder lists mount points strictly below dir, deepest first.
func mountsUnder(dir string) []string {
	ms, err := readMountInfo()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ms {
		if strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m.point)
		}
	}
	// Longer paths first: children before parents.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// setupSharedDir makes dir (created 0700) a shared mount in a peer group of its own, after clearing
// what a crashed predecessor left: stacked binds of dir and mounts below it.
func setupSharedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	for _, p := range mountsUnder(dir) {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
	for i := 0; i < 16; i++ {
		mp, err := isMountPoint(dir)
		if err != nil {
			return err
		}
		if !mp {
			break
		}
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount stale %s: %w", dir, err)
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("stale mounts under %s remain: %v", dir, left)
	}
	// Stale box dirs hold only a passwd, a group and empty mount points (checked above: no mounts).
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeBoxDir(filepath.Join(dir, e.Name()))
		}
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dir, err)
	}
	// Private first: a bind of a shared mount would join the parent's peer group and every box
	// mount would propagate back into the host's other mounts.
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		return fmt.Errorf("make %s private: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}

// removeBoxDir deletes a box dir file by file, never recursively: if anything is still mounted
// there, the removal fails instead of deleting a session's workspace through the mount.
func removeBoxDir(dir string) {
	for _, f := range []string{"passwd", "group"} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	// A spare box's rt dir holds the (unmounted, empty) mount points of its kernel's runtime dir.
	rts, _ := os.ReadDir(filepath.Join(dir, runtimeMount))
	for _, e := range rts {
		_ = os.Remove(filepath.Join(dir, runtimeMount, e.Name()))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			_ = os.Remove(filepath.Join(dir, e.Name())) // an empty mount point, or it stays
		}
	}
	_ = os.Remove(dir)
}

// usernsFD returns a user namespace fd mapping uid/gid 0 to uid (for idmapped mounts), cached.
func (m *Manager) usernsFD(uid int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fd, ok := m.userns[uid]; ok {
		return fd, nil
	}
	// A process in a new user namespace with the mapping; its ns file keeps the namespace alive
	// after it exits. cat blocks on its stdin pipe until the fd is open.
	cmd := exec.Command(m.cat)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
	}
	w, err := cmd.StdinPipe()
	if err != nil {
		return -1, err
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("user namespace for uid %d: %w", uid, err)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	w.Close()
	_ = cmd.Wait()
	if err != nil {
		return -1, fmt.Errorf("user namespace for uid %d: %w", uid, err)
	}
	m.userns[uid] = fd
	return fd, nil
}

// probeIDMap reports whether idmapped mounts work for dir's filesystem: it idmaps a clone of dir and
// drops it without ever attaching it.
func (m *Manager) probeIDMap(dir string) error {
	ufd, err := m.usernsFD(m.cfg.UIDBase)
	if err != nil {
		return err
	}
	tfd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tfd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ufd)}
	if err := unix.MountSetattr(tfd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("mount_setattr(MOUNT_ATTR_IDMAP): %w", err)
	}
	return nil
}

// mountAt puts src on target (a mount point inside the shared state dir), nosuid and nodev, and
// idmapped so that uid sees root's files as its own (unless the manager runs boxes as uid 0).
func (m *Manager) mountAt(src, target string, uid int) error {
	return m.mountAtAttr(src, target, uid, 0)
}

// mountAtAttr is mountAt with extra MOUNT_ATTR_* flags (MOUNT_ATTR_RDONLY for read-only skills).
func (m *Manager) mountAtAttr(src, target string, uid int, extra uint64) error {
	tfd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(tfd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | extra}
	if m.idmap {
		ufd, err := m.usernsFD(uid)
		if err != nil {
			return err
		}
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(ufd)
	}
	if err := unix.MountSetattr(tfd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("mount_setattr %s: %w", src, err)
	}
	if err := unix.MoveMount(tfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount %s -> %s: %w", src, target, err)
	}
	return nil
}

// unmountAll detaches everything mounted at target (stacked mounts included).
func unmountAll(target string) error {
	for i := 0; i < 16; i++ {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				return nil // not (or no longer) a mount point
			}
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", target)
}
