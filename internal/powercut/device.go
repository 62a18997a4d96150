package powercut

import (
	"context"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// blockSize is the unit the volatile cache tracks: ext4's block size (mkfs -b 4096), so a torn
// write never splits one of the filesystem's blocks (as a disk's sector writes are atomic).
const blockSize = 4096

// device is a disk with a volatile write cache, served as the one file of a FUSE mount (disk.img)
// that a loop device attaches. A write lands in the cache (cache: the newest content of each block,
// read back by later reads); a flush (the loop driver turns the filesystem's REQ_PREFLUSH and FUA
// into an fsync of this file) writes the cache to the durable image. A cut freezes the durable
// image after writing a random subset of the writes not yet flushed, as a disk whose cache is
// written back in any order may have done before the power went: what ext4 and SQLite must survive.
type device struct {
	fs.Inode

	mu      sync.Mutex
	durable *os.File // the image as it would be after a power cut now
	size    int64
	cache   map[int64][]byte // block index -> newest content, not yet flushed
	log     []pendingWrite   // the unflushed writes in order (one entry per block written)
	frozen  bool             // cut: nothing reaches durable any more
	rng     *rand.Rand
	stats   Stats
}

type pendingWrite struct {
	block int64
	data  []byte
}

// Stats counts what the device saw since it was attached.
type Stats struct {
	Writes  int // block writes
	Flushes int // fsyncs (flushes) that reached the device
	Pending int // at the cut: block writes not yet flushed
	Kept    int // at the cut: of those, the ones the random subset wrote to the image
}

var (
	_ fs.NodeOpener    = (*device)(nil)
	_ fs.NodeReader    = (*device)(nil)
	_ fs.NodeWriter    = (*device)(nil)
	_ fs.NodeFsyncer   = (*device)(nil)
	_ fs.NodeGetattrer = (*device)(nil)
	_ fs.NodeSetattrer = (*device)(nil)
	_ fs.NodeFlusher   = (*device)(nil)
)

// Open asks for direct I/O: no page cache of this file in the kernel, every read and write of the
// loop device reaches the device's methods.
func (d *device) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (d *device) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o600
	out.Size = uint64(d.size)
	out.Blksize = blockSize
	out.Blocks = uint64(d.size / 512)
	return 0
}

// Setattr changes nothing (the size is fixed); the loop driver and losetup only read attributes.
func (d *device) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return d.Getattr(ctx, f, out)
}

// Flush is close(2)'s, not a disk flush: it promises nothing.
func (d *device) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno { return 0 }

// block returns a copy of block i as the filesystem sees it: the cache's, else the image's.
func (d *device) block(i int64) ([]byte, error) {
	b := make([]byte, blockSize)
	if c, ok := d.cache[i]; ok {
		copy(b, c)
		return b, nil
	}
	if _, err := d.durable.ReadAt(b, i*blockSize); err != nil {
		return nil, err
	}
	return b, nil
}

func (d *device) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off >= d.size {
		return fuse.ReadResultData(nil), 0
	}
	n := min(int64(len(dest)), d.size-off)
	for done := int64(0); done < n; {
		i, in := (off+done)/blockSize, (off+done)%blockSize
		b, err := d.block(i)
		if err != nil {
			return nil, syscall.EIO
		}
		done += int64(copy(dest[done:n], b[in:]))
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (d *device) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off+int64(len(data)) > d.size {
		return 0, syscall.ENOSPC
	}
	for done := int64(0); done < int64(len(data)); {
		i, in := (off+done)/blockSize, (off+done)%blockSize
		b, err := d.block(i)
		if err != nil {
			return 0, syscall.EIO
		}
		done += int64(copy(b[in:], data[done:]))
		d.cache[i] = b
		d.stats.Writes++
		if !d.frozen {
			d.log = append(d.log, pendingWrite{block: i, data: append([]byte(nil), b...)})
		}
	}
	return uint32(len(data)), 0
}

// Fsync is the disk's flush: the cache goes to the durable image (unless cut).
func (d *device) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.frozen {
		return 0
	}
	d.stats.Flushes++
	for i, b := range d.cache {
		if _, err := d.durable.WriteAt(b, i*blockSize); err != nil {
			return syscall.EIO
		}
	}
	clear(d.cache)
	d.log = d.log[:0]
	return 0
}

// isFrozen reports whether the device was cut.
func (d *device) isFrozen() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.frozen
}

// cut writes a random subset of the unflushed writes to the image, in order, and freezes it.
func (d *device) cut() (Stats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Pending = len(d.log)
	for _, w := range d.log {
		if d.rng.IntN(2) == 0 {
			continue
		}
		if _, err := d.durable.WriteAt(w.data, w.block*blockSize); err != nil {
			return d.stats, err
		}
		d.stats.Kept++
	}
	d.log = nil
	d.frozen = true
	return d.stats, nil
}
