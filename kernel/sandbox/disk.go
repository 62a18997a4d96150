package sandbox

// disk.go caps a session's workspace with a file system of its own: a sparse ext4 image per
// workspace (<images>/<session>.img), loop-mounted on the workspace dir. A session that writes past
// it gets ENOSPC (and past its inode count, ENOSPC too) from the kernel's own file system code, while
// its files so far stay (and are checkpointed); other sessions and the server's data dir do not
// share its blocks. Chosen over ext4/XFS project quotas because those need the data dir's file
// system mounted with prjquota (a host setting the server cannot make) and over a periodic du
// because that only notices after the fact. The image is sparse (a fresh one takes ~4 MB on disk),
// mounted with discard so deleted files give their blocks back to the host, and with
// noinit_itable (a sparse file already reads as zeros, so the kernel need not write inode tables).
//
// Making and mounting an image costs 0.1-0.5 s on a busy machine (mkfs.ext4, loop set-up), too much
// for session create -> first result: like the kernel pool, a couple of spare images are made and
// mounted ahead; a new workspace gets a clone of a spare's mount (open_tree + move_mount, well under
// a millisecond), the spare's own mount is detached and its image renamed to the session's.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Disks makes and mounts the workspace images. Safe for concurrent use.
type Disks struct {
	dir     string // where the images live
	size    int64
	inodes  int
	mu      sync.Mutex
	mounted map[string]bool // workspace dirs we mounted
	legacy  map[string]bool // workspace dirs with files but no image (reported once)
	// unhealed: workspace dirs a repair unmounted and has not mounted again (diskheal.go)
	unhealed map[string]bool
	// lostWrites: workspace dirs whose file system failed a sync (NoteLostWrites), repaired as failed
	lostWrites map[string]bool
	spares     []string // spare images, each mounted at <image>.d
	filling    bool     // a refill goroutine runs
	closed     bool
	wg         sync.WaitGroup // the refill goroutine
}

// spareCount is how many mounted spare images are kept ready.
const spareCount = 2

// NewDisks returns workspace disks of size bytes and inodes inodes (0: ext4's default for the
// size), their images in dir. Needs root, mkfs.ext4 and loop devices.
func NewDisks(dir string, size int64, inodes int) (*Disks, error) {
	if size < 8<<20 {
		return nil, fmt.Errorf("sandbox: disk size %d is below 8 MiB", size)
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return nil, fmt.Errorf("sandbox: workspace disks: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Workspace disks a killed predecessor left mounted: nothing of this process uses them yet, and a
	// session's disk is mounted again when it is served. Left, the mount of a session that is served
	// elsewhere by then (a cluster) stayed until the host rebooted, since Close unmounts only what its
	// own process mounted (the chaos harness's cluster run found it: a kill -9 unmounts nothing).
	for _, mp := range diskMountsIn(dir) {
		_ = unmountAll(mp)
	}
	// Spares a crashed predecessor left are of no use (their mounts may be gone).
	old, _ := filepath.Glob(filepath.Join(dir, "spare-*"))
	for _, p := range old {
		if strings.HasSuffix(p, ".d") {
			_ = unmountAll(p)
		}
		_ = os.RemoveAll(p)
	}
	d := &Disks{dir: dir, size: size, inodes: inodes, mounted: map[string]bool{}, legacy: map[string]bool{},
		unhealed: map[string]bool{}, lostWrites: map[string]bool{}}
	d.refill()
	return d, nil
}

// diskMountsIn is where this mount namespace has an image of dir loop-mounted (the loop device's
// backing file names it, as renamed since: a spare's image takes its session's name).
func diskMountsIn(dir string) []string {
	abs, err := filepath.Abs(dir) // backing files are absolute; data_dir may not be
	if err != nil {
		return nil
	}
	entries, err := readMountInfo()
	if err != nil {
		return nil
	}
	var points []string
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.source, "/dev/loop")
		if !ok {
			continue
		}
		b, err := os.ReadFile("/sys/block/loop" + n + "/loop/backing_file")
		if err == nil && filepath.Dir(strings.TrimSpace(string(b))) == abs {
			points = append(points, e.point)
		}
	}
	return points
}

// refill starts a goroutine that makes spares until there are spareCount (one goroutine at a time;
// the caller holds d.mu or is NewDisks).
func (d *Disks) refill() {
	if d.filling || d.closed || len(d.spares) >= spareCount {
		return
	}
	d.filling = true
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			d.mu.Lock()
			if d.closed || len(d.spares) >= spareCount {
				d.filling = false
				d.mu.Unlock()
				return
			}
			d.mu.Unlock()
			img := filepath.Join(d.dir, fmt.Sprintf("spare-%d-%d.img", os.Getpid(), spareSeq.Add(1)))
			err := d.makeImage(img, d.size)
			if err == nil {
				err = d.mountImage(img, img+".d")
			}
			d.mu.Lock()
			if err != nil || d.closed {
				_ = unmountAll(img + ".d")
				_ = os.RemoveAll(img + ".d")
				_ = os.Remove(img)
				d.filling = false
				d.mu.Unlock()
				return // the next take makes its image itself, and tries again
			}
			d.spares = append(d.spares, img)
			d.mu.Unlock()
		}
	}()
}

var spareSeq atomic.Int64

// mountImage loop-mounts img on dir (made) and removes mkfs's lost+found, of no use to a session
// and in its listings otherwise. The removal is committed at once: a fresh image's first journal
// commit needs host blocks its sparse file has not got, and left to the 5 s commit timer it could
// meet a host that filled meanwhile and abort the journal of a spare nobody uses yet (diskheal.go).
func (d *Disks) mountImage(img, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := run("mount", "-t", "ext4", "-o", "loop,discard,noinit_itable,nosuid,nodev", img, dir); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, "lost+found"))
	// A failed sync is not this mount's failure: a journal it aborted is found as any other is (a
	// spare's when it is taken, a workspace's before its next turn).
	if f, err := os.Open(dir); err == nil {
		_ = unix.Syncfs(int(f.Fd()))
		_ = f.Close()
	}
	return nil
}

// takeSpare puts a spare's file system on ws and makes its image ws's; false when none is ready.
// The caller holds d.mu.
func (d *Disks) takeSpare(ws, img string) bool {
	defer d.refill()
	// A spare whose file system failed while it waited (its first journal commit on a full host:
	// diskheal.go) is thrown away, not handed to a session read-only.
	for len(d.spares) > 0 && hasErrors(d.spares[0]+".d") {
		_ = unmountAll(d.spares[0] + ".d")
		_ = os.Remove(d.spares[0] + ".d")
		_ = os.Remove(d.spares[0])
		d.spares = d.spares[1:]
	}
	if len(d.spares) == 0 {
		return false
	}
	spare := d.spares[0]
	d.spares = d.spares[1:]
	tfd, err := unix.OpenTree(unix.AT_FDCWD, spare+".d", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err == nil {
		err = unix.MoveMount(tfd, "", unix.AT_FDCWD, ws, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(tfd)
	}
	_ = unmountAll(spare + ".d")
	_ = os.Remove(spare + ".d")
	if err == nil {
		if err = os.Rename(spare, img); err != nil {
			_ = unmountAll(ws)
		}
	}
	if err != nil {
		_ = os.Remove(spare)
		return false
	}
	return true
}

func (d *Disks) image(ws string) string { return filepath.Join(d.dir, filepath.Base(ws)+".img") }

// EnsureWorkspaceDisk makes ws the mount point of its image (made on first use, of size bytes; 0:
// the default size) unless it already is. An image's size is set when it is made. A workspace that
// already holds files without an image (made before disks were on) is left as it is and reported,
// never hidden under an empty file system.
func (d *Disks) EnsureWorkspaceDisk(ws string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mounted[ws] || d.legacy[ws] {
		return nil
	}
	if d.unhealed[ws] { // its image may still be mounted in a box: never mounted twice
		return fmt.Errorf("sandbox: workspace %s: the repair of its disk has not finished", ws)
	}
	if mp, err := isMountPoint(ws); err != nil || mp {
		d.mounted[ws] = mp || d.mounted[ws]
		return err
	}
	img := d.image(ws)
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		if entries, _ := os.ReadDir(ws); len(entries) > 0 {
			d.legacy[ws] = true
			return fmt.Errorf("sandbox: workspace %s has files but no disk image: left without a disk quota", ws)
		}
		if err := os.MkdirAll(ws, 0o755); err != nil {
			return err
		}
		if size <= 0 || size == d.size {
			size = d.size
			if d.takeSpare(ws, img) { // spares are of the default size
				d.mounted[ws] = true
				return nil
			}
		}
		if err := d.makeImage(img, size); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else if imageHasErrors(img) { // a server stopped before it repaired it (diskheal.go)
		if err := checkImage(img); err != nil {
			return err
		}
	}
	if err := d.mountImage(img, ws); err != nil {
		return err
	}
	d.mounted[ws] = true
	return nil
}

// makeImage makes a sparse ext4 image: no reserved blocks, root-owned root (the box's uid through
// the idmapped mount).
func (d *Disks) makeImage(img string, size int64) error {
	tmp := img + ".tmp"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		return err
	}
	if err := os.Truncate(tmp, size); err != nil {
		return err
	}
	args := []string{"-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0"}
	if inodes := min(int64(d.inodes), size/4096); inodes > 0 {
		// A session's smaller disk holds at most one inode per 4 KiB block: more would not fit.
		args = append(args, "-N", strconv.FormatInt(inodes, 10))
	}
	if err := run("mkfs.ext4", append(args, tmp)...); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, img)
}

// RemoveWorkspaceDisk unmounts ws's image and deletes it (the session is gone).
func (d *Disks) RemoveWorkspaceDisk(ws string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := unmountAll(ws)
	delete(d.mounted, ws)
	delete(d.legacy, ws)
	delete(d.unhealed, ws)
	delete(d.lostWrites, ws)
	if rerr := os.Remove(d.image(ws)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// Close unmounts every workspace disk (the images stay for the next start).
func (d *Disks) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.wg.Wait() // a spare being made is thrown away
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for ws := range d.mounted {
		errs = append(errs, unmountAll(ws))
	}
	d.mounted = map[string]bool{}
	for _, img := range d.spares {
		errs = append(errs, unmountAll(img+".d"))
		_ = os.Remove(img + ".d")
		_ = os.Remove(img)
	}
	d.spares = nil
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sandbox: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
