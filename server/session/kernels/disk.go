package kernels

// disk.go puts each workspace on a file system of its own when the provisioner can (kernel/sandbox:
// a loop-mounted ext4 image of sandbox.disk bytes): a session that fills it gets ENOSPC in Python,
// its files so far stay and are checkpointed, and nobody else's space is touched.

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/carryover/carryover"
)

// WorkspaceDisks is a provisioner that caps workspaces with a file system of their own.
type WorkspaceDisks interface {
	DisksEnabled() bool
	EnsureWorkspaceDisk(dir string, size int64) error // mount (made on first use, size 0: default) unless mounted
	RemoveWorkspaceDisk(dir string) error             // unmount and delete (the session is gone)
}

// DiskHealer is a provisioner whose workspace disks an I/O error of the host (a full disk under a
// sparse image) can leave read-only, and that repairs them (kernel/sandbox/diskheal.go).
type DiskHealer interface {
	// WorkspaceDiskFailed says whether dir's disk is read-only after an error, or lost writes
	// (NoteLostWrites), and needs a repair.
	WorkspaceDiskFailed(dir string) bool
	// NoteLostWrites takes a failed sync of dir's file system (a checkpoint's).
	NoteLostWrites(dir string)
	// HealWorkspaceDisk repairs dir's disk if it needs it (healed: it did), calling release first
	// to end what holds it (the session's kernel). While the host is still full it changes nothing
	// and answers an error wrapping ENOSPC.
	HealWorkspaceDisk(dir string, release func()) (healed bool, err error)
}

// Healer is the provisioner as a DiskHealer, nil when workspaces get no disk of their own.
func (f *Factory) Healer() DiskHealer {
	if h, ok := f.Disks().(DiskHealer); ok {
		return h
	}
	return nil
}

// Disks is the provisioner as a WorkspaceDisks, nil when workspaces get no disk of their own.
func (f *Factory) Disks() WorkspaceDisks {
	if d, ok := f.opts.Provisioner.(WorkspaceDisks); ok && d.DisksEnabled() {
		return d
	}
	return nil
}

// MountDisk gives ws its disk; a workspace that cannot have one keeps working without a cap
// (logged), since refusing the session its files would be worse.
func (f *Factory) MountDisk(id, ws string, size int64) {
	if d := f.Disks(); d != nil {
		if err := d.EnsureWorkspaceDisk(ws, size); err != nil {
			f.log.Warn("workspace without a disk quota", "session", id, "err", err)
		}
	}
}

// MaterializeOnDisk restores the last checkpoint's files into ws on its disk: restored beside it
// first (the restore renames its directory into place), then copied in.
func (f *Factory) MaterializeOnDisk(ctx context.Context, id, ws string, size int64) (int, error) {
	stage := ws + ".stage"
	_ = os.RemoveAll(stage)
	defer os.RemoveAll(stage)
	n, err := f.ckpt.MaterializeWorkspace(ctx, id, stage)
	if err != nil {
		return n, err
	}
	f.MountDisk(id, ws, size)
	return n, copyTree(stage, ws)
}

// copyTree copies the directories and regular files of src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, info.Mode().Perm())
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		err = errors.Join(err, out.Close())
		if err == nil {
			err = os.Chtimes(target, info.ModTime(), info.ModTime())
		}
		return err
	})
}

// CheckDiskless refuses a workspace whose files live in a disk image this server cannot mount
// (the sandbox off or unavailable since): shown as an empty dir it would be filled anew and its
// files pruned from the next checkpoint.
func (f *Factory) CheckDiskless(id string) error {
	if f.Disks() != nil {
		return nil
	}
	img := filepath.Join(f.cfg.DataDir, "disks", id+".img")
	if _, err := os.Stat(img); err != nil {
		return nil
	}
	return carryover.Errorf(carryover.CodeInternal, "the session's workspace is in the disk image %s, which this server cannot mount "+
		"(the sandbox is off or unavailable): turn the sandbox back on to reach its files", img)
}

// RemoveWorkspace deletes a session's workspace and its disk.
func (f *Factory) RemoveWorkspace(id string) error {
	ws := f.workspace(id)
	if f.Disks() == nil { // an image left by a sandboxed run of the server goes with its session
		_ = os.Remove(filepath.Join(f.cfg.DataDir, "disks", id+".img"))
	}
	if d := f.Disks(); d != nil {
		if err := d.RemoveWorkspaceDisk(ws); err != nil {
			f.log.Warn("workspace disk not removed", "session", id, "err", err)
		}
	}
	return os.RemoveAll(ws)
}
