package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
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
// The workspace is attached as an idmapped mount (Linux >= 5.12 on ext4/xfs/btrfs, tmpfs >= 6.3):
// files owned by root on disk (the server writes them: uploads, restores) appear owned by the
// sandbox uid inside, and what the sandbox creates lands as root on disk. No chown ever runs, and
// the server keeps full ownership of every workspace. Where idmapped mounts are refused the workspace
// is chowned to the sandbox uid instead (Manager.IDMapped reports which).

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
	_ = os.Remove(filepath.Join(dir, "workspace"))
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

// mountWorkspace puts src on target (a mount point inside the shared state dir), nosuid and nodev,
// idmapped so uid sees root's files as its own; it reports whether the idmap was applied.
func (m *Manager) mountWorkspace(src, target string, uid int) (idmapped bool, err error) {
	tfd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return false, fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(tfd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if m.idmap.Load() {
		ufd, err := m.usernsFD(uid)
		if err != nil {
			return false, err
		}
		idm := attr
		idm.Attr_set |= unix.MOUNT_ATTR_IDMAP
		idm.Userns_fd = uint64(ufd)
		if err := unix.MountSetattr(tfd, "", unix.AT_EMPTY_PATH, &idm); err == nil {
			idmapped = true
		} else {
			m.idmap.Store(false)
			m.log.Warn("sandbox: idmapped mounts refused here; workspaces will be chowned to the sandbox uid instead",
				"path", src, "err", err)
		}
	}
	if !idmapped {
		if err := unix.MountSetattr(tfd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return false, fmt.Errorf("mount_setattr %s: %w", src, err)
		}
		if err := chownTree(src, uid); err != nil {
			return false, err
		}
	}
	if err := unix.MoveMount(tfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return false, fmt.Errorf("move_mount %s -> %s: %w", src, target, err)
	}
	return idmapped, nil
}

// chownTree gives every entry of dir to uid, never following a symlink (os.Root keeps the walk
// inside dir even if the tree changes under it).
func chownTree(dir string, uid int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if err := root.Lchown(p, uid, uid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("chown %s: %w", filepath.Join(dir, p), err)
		}
		return nil
	})
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
