// Package powercut is a disk that a test can cut the power of: a real ext4 filesystem on a loop
// device whose backing "disk" has a volatile write cache (device.go, served over FUSE). The kernel's
// own paths run unchanged: SQLite's fsync reaches ext4, whose journal commit sends a flush down the
// block layer, which the loop driver turns into an fsync of its backing file, which moves the cache
// to the durable image. A cut keeps only the durable image plus a random subset of the unflushed
// writes, as a power cut does to a disk with a write cache; mounting again replays ext4's journal
// on what is left. This is LazyFS's idea one layer lower: below the filesystem rather than above it,
// so ext4's ordering and barriers are the ones tested. It needs root, /dev/fuse, loop devices and
// mkfs.ext4; Available says why not.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Disk is one image, mounted at Dir while attached. Not safe for concurrent use.
type Disk struct {
	Dir string // where the ext4 filesystem is mounted

	work  string // the image, the FUSE mount point
	size  int64
	rng   *rand.Rand
	dev   *device
	fuse  *fuse.Server
	loop  string
	cuts  int
	Trace func(format string, args ...any) // optional: what the disk does, for a test's log
	// HoldWait is how long Unmount waits for a process holding the mount or the loop device to let
	// go (0: 10 s).
	HoldWait time.Duration
}

// Available says why a Disk cannot be made here ("" when it can).
func Available() string {
	if os.Geteuid() != 0 {
		return "powercut needs root (loop devices, mount)"
	}
	for _, p := range []string{"/dev/fuse", "/dev/loop-control"} {
		if _, err := os.Stat(p); err != nil {
			return "powercut needs " + p
		}
	}
	for _, b := range []string{"mkfs.ext4", "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(b); err != nil {
			return "powercut needs " + b
		}
	}
	return ""
}

// New makes an ext4 image of size bytes under work (a directory of the host's own filesystem) and
// mounts it at work/mnt. seed picks which unflushed writes each cut keeps.
func New(work string, size int64, seed uint64) (*Disk, error) {
	d := &Disk{Dir: filepath.Join(work, "mnt"), work: work, size: size, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	for _, p := range []string{d.Dir, filepath.Join(work, "fuse")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
	}
	img := filepath.Join(work, "durable.img")
	f, err := os.Create(img)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return nil, err
	}
	// lazy_itable_init=0: no background zeroing thread writing after mount, so the disk is quiet
	// when nothing writes; the journal is ext4's default (ordered data).
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0", img).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("powercut: mkfs.ext4: %w: %s", err, out)
	}
	return d, d.Mount()
}

// Mount attaches the image: a fresh device over the durable image, a loop device on it, ext4 at
// Dir (replaying its journal after a cut).
func (d *Disk) Mount() error {
	durable, err := os.OpenFile(filepath.Join(d.work, "durable.img"), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	d.dev = &device{durable: durable, size: d.size, cache: map[int64][]byte{}, rng: d.rng}
	root := &rootNode{dev: d.dev}
	sec := time.Duration(0)
	d.fuse, err = fs.Mount(filepath.Join(d.work, "fuse"), root, &fs.Options{
		EntryTimeout: &sec, AttrTimeout: &sec,
		MountOptions: fuse.MountOptions{DirectMount: true, FsName: "powercut", Name: "powercut", MaxWrite: 1 << 19},
	})
	if err != nil {
		durable.Close()
		return fmt.Errorf("powercut: fuse mount: %w", err)
	}
	out, err := exec.Command("losetup", "--find", "--show", filepath.Join(d.work, "fuse", "disk.img")).CombinedOutput()
	if err != nil {
		d.teardown()
		return fmt.Errorf("powercut: losetup: %w: %s", err, out)
	}
	d.loop = strings.TrimSpace(string(out))
	if out, err := exec.Command("mount", "-t", "ext4", d.loop, d.Dir).CombinedOutput(); err != nil {
		d.teardown()
		return fmt.Errorf("powercut: mount: %w: %s", err, out)
	}
	d.tracef("mounted %s on %s", d.loop, d.Dir)
	return nil
}

// Cut cuts the power: from now on nothing written reaches the image, and of the writes not yet
// flushed a random subset is kept. The caller then kills every process using Dir (a real power
// cut stops them too; what they write after the cut is lost either way) and calls Unmount.
func (d *Disk) Cut() (Stats, error) {
	if d.dev == nil {
		return Stats{}, errors.New("powercut: not mounted")
	}
	d.cuts++
	st, err := d.dev.cut()
	d.tracef("cut %d: %d block writes, %d flushes, %d unflushed, %d of them kept", d.cuts, st.Writes, st.Flushes, st.Pending, st.Kept)
	return st, err
}

// Unmount detaches the filesystem, the loop device and the FUSE mount. After a Cut nothing of it
// reaches the image; without one it is a clean unmount (ext4 flushes, the device writes it).
func (d *Disk) Unmount() error {
	var errs []error
	// Processes killed a moment ago may still be exiting (their files close as they go): wait a
	// little for them before calling the mount busy.
	var out []byte
	var err error
	for deadline := time.Now().Add(d.holdWait()); ; time.Sleep(50 * time.Millisecond) {
		if out, err = exec.Command("umount", d.Dir).CombinedOutput(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		// Something still holds it (a process the caller missed): name it, detach lazily so the
		// test goes on, and say so.
		holders := holdersOf(d.Dir)
		exec.Command("umount", "-l", d.Dir).Run()
		errs = append(errs, fmt.Errorf("powercut: umount %s: %w: %s (held by %v)", d.Dir, err, out, holders))
	}
	errs = append(errs, d.teardown())
	return errors.Join(errs...)
}

// teardown detaches the loop device and the FUSE mount and closes the image.
func (d *Disk) teardown() error {
	var errs []error
	loop := d.loop
	if d.loop != "" {
		if out, err := exec.Command("losetup", "-d", d.loop).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("powercut: losetup -d: %w: %s", err, out))
		}
		d.loop = ""
	}
	if d.fuse != nil {
		// The loop driver lets go of its backing file a moment after losetup -d returns (the
		// detach finishes in a work queue): retry the unmount a little before forcing it. Not
		// go-fuse's Unmount, whose fallback is a fusermount binary this host may not have.
		mnt := filepath.Join(d.work, "fuse")
		err := syscall.Unmount(mnt, 0)
		for deadline := time.Now().Add(d.holdWait()); err != nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			err = syscall.Unmount(mnt, 0)
		}
		switch {
		case err == nil:
			d.fuse.Wait() // its serving loop ends with the mount
		case d.dev != nil && d.dev.isFrozen():
			// Something outside this Disk still holds the detached loop device (named below). After
			// a cut nothing it does reaches the image (the device is frozen, its image file closed
			// next), so the mount is detached lazily and the next Mount serves a fresh device: the
			// test's promise holds. Its serving loop ends whenever the holder lets go.
			syscall.Unmount(mnt, syscall.MNT_DETACH)
			d.tracef("fuse mount %s held after the cut (%v; %s: %v): detached lazily", mnt, holdersOf(mnt), loop, loopHolders(loop))
		default:
			syscall.Unmount(mnt, syscall.MNT_DETACH)
			errs = append(errs, fmt.Errorf("powercut: fuse unmount: %w (held by %v; %s: %v)", err,
				holdersOf(mnt), loop, loopHolders(loop)))
		}
		d.fuse = nil
	}
	if d.dev != nil {
		d.dev.durable.Close()
		d.dev = nil
	}
	return errors.Join(errs...)
}

// Close unmounts (if mounted) and removes nothing: the caller's temp dir holds the image.
func (d *Disk) Close() error {
	if d.dev == nil {
		return nil
	}
	return d.Unmount()
}

func (d *Disk) holdWait() time.Duration {
	if d.HoldWait > 0 {
		return d.HoldWait
	}
	return 10 * time.Second
}

func (d *Disk) tracef(format string, args ...any) {
	if d.Trace != nil {
		d.Trace(format, args...)
	}
}

// rootNode is the FUSE mount's root directory, holding the device as disk.img.
type rootNode struct {
	fs.Inode
	dev *device
}

var _ fs.NodeOnAdder = (*rootNode)(nil)

func (r *rootNode) OnAdd(ctx context.Context) {
	r.AddChild("disk.img", r.NewPersistentInode(ctx, r.dev, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// holdersOf lists the processes with a cwd, root or open file under dir (for an error message).
func holdersOf(dir string) []string {
	var found []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		links := []string{"/proc/" + p.Name() + "/cwd", "/proc/" + p.Name() + "/root"}
		fds, _ := os.ReadDir("/proc/" + p.Name() + "/fd")
		for _, fd := range fds {
			links = append(links, "/proc/"+p.Name()+"/fd/"+fd.Name())
		}
		for _, l := range links {
			if t, err := os.Readlink(l); err == nil && strings.HasPrefix(t, dir) {
				comm, _ := os.ReadFile("/proc/" + p.Name() + "/comm")
				found = append(found, p.Name()+" "+strings.TrimSpace(string(comm))+" "+t)
				break
			}
		}
	}
	return found
}

// loopHolders says what keeps loop (a detached device) alive: its state in sysfs, the processes
// with it open, and those whose mount namespace still mounts it (a namespace copied while it was
// mounted here keeps the filesystem, hence the device, hence its backing file, after our umount).
func loopHolders(loop string) []string {
	if loop == "" {
		return nil
	}
	name := filepath.Base(loop)
	var found []string
	if b, err := os.ReadFile("/sys/block/" + name + "/loop/backing_file"); err == nil {
		ac, _ := os.ReadFile("/sys/block/" + name + "/loop/autoclear")
		found = append(found, "still backed by "+strings.TrimSpace(string(b))+", autoclear "+strings.TrimSpace(string(ac)))
	}
	own, _ := os.Readlink("/proc/self/ns/mnt")
	seen := map[string]bool{own: true, "": true} // mount namespaces looked at (one process each)
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		dir := "/proc/" + p.Name()
		comm, _ := os.ReadFile(dir + "/comm")
		who := p.Name() + " " + strings.TrimSpace(string(comm))
		fds, _ := os.ReadDir(dir + "/fd")
		for _, fd := range fds {
			if t, _ := os.Readlink(dir + "/fd/" + fd.Name()); t == loop {
				found = append(found, who+" has it open")
				break
			}
		}
		ns, _ := os.Readlink(dir + "/ns/mnt")
		if seen[ns] {
			continue
		}
		seen[ns] = true
		if mi, err := os.ReadFile(dir + "/mountinfo"); err == nil && strings.Contains(string(mi), " "+loop+" ") {
			found = append(found, who+" mounts it in "+ns)
		}
	}
	return found
}
