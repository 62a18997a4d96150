package sandbox

// skills.go shows a tenant's skills folder at /skills in a box. Like /workspace, every box binds an
// empty mount point of its own there when it starts (a warm kernel does not know its tenant yet),
// and the folder mounted onto it later propagates into the running sandbox: read-only unless the
// session asked for "rw" (the mount itself carries MOUNT_ATTR_RDONLY, so nothing inside can lift
// it). /skills is on the kernel's PYTHONPATH.

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SkillsPath is where a box sees its tenant's skills.
const SkillsPath = "/skills"

// AttachSkills mounts the host dir src at the box's /skills, read-only unless writable. Attaching
// the same dir in the same mode again is a no-op; another dir or mode replaces the mount.
func (b *Box) AttachSkills(src string, writable bool) error {
	key := src + "\x00ro"
	var attr uint64 = unix.MOUNT_ATTR_RDONLY
	if writable {
		key, attr = src+"\x00rw", 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released {
		return errors.New("sandbox: box is released")
	}
	if b.mounts["skills"] == key {
		return nil
	}
	target := filepath.Join(b.dir, "skills")
	if b.mounts["skills"] != "" {
		if err := unmountAll(target); err != nil {
			return err
		}
		delete(b.mounts, "skills")
	}
	if err := b.m.mountAtAttr(src, target, b.uid, attr); err != nil {
		return err
	}
	b.mounts["skills"] = key
	return nil
}

// AttachSkills shows a tenant's skills in the kernel's box (kernels.SkillsAttacher, server/session/kernels).
func (k *boxKernel) AttachSkills(src string, writable bool) error {
	return k.box.AttachSkills(src, writable)
}
