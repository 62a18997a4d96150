package kernels

// disk_size.go: a session may ask for its workspace disk's size (sandbox.disk in its create request,
// like memory and cpus), up to the server's ceiling (sandbox.max_disk). The image is made at that
// size when the workspace is first mounted (kernel/sandbox/disk.go); a size the server cannot give
// is refused at create, before anything is made or stored.

import (
	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// minDisk is the smallest workspace disk: an ext4 file system with its journal needs a few MiB.
const minDisk = 8 << 20

// CheckDisk validates a create request's sandbox.disk ("" asks for none: always fine).
func (f *Factory) CheckDisk(disk string) error {
	if disk == "" {
		return nil
	}
	bad := func(msg string, args ...any) *carryover.Error {
		return carryover.Errorf(carryover.CodeInvalid, "sandbox.disk: "+msg, args...).WithDetails("field", "sandbox.disk")
	}
	size, err := kernel.ParseQuantity(disk)
	if err != nil {
		return bad("%v", err)
	}
	if f.Disks() == nil {
		return bad("this server gives workspaces no disk of their own (sandbox.enabled and sandbox.disk in its config)")
	}
	if size < minDisk {
		return bad("%q is below the smallest disk, %s", disk, kernel.FormatMemory(minDisk))
	}
	if max := f.cfg.maxDisk(); max > 0 && size > max {
		return bad("%q is over the server's ceiling of %s", disk, kernel.FormatMemory(max)).WithDetails("limit", f.cfg.MaxDisk)
	}
	return nil
}

// maxDisk is sandbox.max_disk in bytes (0: no ceiling; a bad value is refused at start-up by Validate
// of the provisioner's config, and counts as no ceiling here).
func (c Config) maxDisk() int64 {
	n, err := kernel.ParseQuantity(c.MaxDisk)
	if err != nil {
		return 0
	}
	return n
}

// DiskSize is the size of a session's workspace disk (its sandbox.disk) in bytes (0: the server's
// default).
func DiskSize(disk string) int64 {
	n, err := kernel.ParseQuantity(disk)
	if err != nil {
		return 0
	}
	return n
}
