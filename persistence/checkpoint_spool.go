package persistence

// The spool protocol between the in-kernel agent (agent/carryover_agent/, whose package docstring is
// the reference) and this package. Large state never travels through the Jupyter protocol and is never
// held whole in Go's memory:
//
//   - Snapshot: Go calls __carryover__.call("snapshot", {"token", "committed", "chunk_size"}). The agent
//     writes every chunk Go does not have yet as a file <spool>/<token>/<hash> holding the chunk's STORED
//     bytes (codec "raw" or "zstd"), or inlines it as base64 when small, and answers a small JSON naming
//     them with their codec, raw length and children. Go streams the files into the store in bounded
//     batches (children before the descriptors that list them) and removes the directory. "committed" is
//     the id of the last checkpoint Go committed: only then does the agent trust that Go holds the chunks
//     of its previous snapshot, so a failed commit never makes it skip a chunk Go lacks.
//   - Restore: Go reads each group's descriptor, writes the group's pickle stream as one file and each
//     out-of-band buffer as one file assembled from its chunks (straight from the SQLite blob to the
//     file, two workers), a large one as one file per worker (splitBuffer), and calls
//     __carryover__.call("restore", {...}). The agent maps buffer files copy-on-write (mmap
//     ACCESS_COPY; a buffer's later parts over their places in its first file's mapping) and hands
//     them to pickle.loads(buffers=...): no further copy. A wake's large buffers are not assembled:
//     an agent call before the restore maps them and Go fills them in the background (lazy_restore.go).

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// spoolChunk is one chunk named in a snapshot answer.
type spoolChunk struct {
	Hash     string   `json:"h"`
	Codec    string   `json:"c"`
	RawLen   int64    `json:"n"`
	Stored   int64    `json:"s"`
	File     string   `json:"f,omitempty"`
	Data     string   `json:"d,omitempty"`
	Children []string `json:"ch,omitempty"`
}

// ingestBatchBytes bounds the chunk data held in memory while streaming spool files into the store.
const ingestBatchBytes = 64 << 20

// spoolBufs keeps a few read buffers of spool files between checkpoints. A turn that wrote one element
// of a big array spools one 4 MiB chunk; reading it into a freshly allocated buffer cost more than
// storing it (15-19 ms measured: page faults, heap growth), into a kept one 0.6-0.9 ms. A sync.Pool
// would not do: it is emptied at every GC, and a server collects many times between two turns.
// At most spoolBufsMax buffers of at most spoolBufMaxCap bytes are kept (32 MiB at worst).
var spoolBufs = bufList{max: spoolBufsMax}

const (
	spoolBufsMax   = 4
	spoolBufMaxCap = 2 * DefaultChunkSize
)

// bufList is a bounded stack of reusable byte buffers.
type bufList struct {
	mu   sync.Mutex
	free [][]byte
	max  int
}

// get returns a kept buffer (length 0), or nil when none is kept.
func (l *bufList) get() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		return nil
	}
	b := l.free[n-1]
	l.free[n-1] = nil
	l.free = l.free[:n-1]
	return b
}

// put keeps b for a later get, unless the list is full or b is empty or larger than spoolBufMaxCap.
func (l *bufList) put(b []byte) {
	if cap(b) == 0 || cap(b) > spoolBufMaxCap {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) < l.max {
		l.free = append(l.free, b[:0])
	}
}

// ingestSpool puts the answer's chunks through w in order, batch by batch, reading spool files from
// dir, and returns the stored bytes newly written.
func ingestSpool(ctx context.Context, w carryover.ChunkWriter, dir string, chunks []spoolChunk) (int64, error) {
	var (
		written int64
		batch   []carryover.ChunkInput
		size    int
		bufs    [][]byte // reused between batches; some are kept in spoolBufs after the last
		used    int
		sdir    *spoolDirFD // opened at the first file chunk
		pending []toVerify  // the batch's compressed chunks, checked before it is put
	)
	defer func() {
		sdir.close()
		for _, b := range bufs {
			spoolBufs.put(b)
		}
	}()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := verifyAll(pending); err != nil {
			return err
		}
		pending = pending[:0]
		n, err := w.PutChunks(ctx, batch)
		if err != nil {
			return err
		}
		written += n
		batch, size, used = batch[:0], 0, 0
		return nil
	}
	for _, c := range chunks {
		var data []byte
		switch {
		case c.File != "":
			if filepath.Base(c.File) != c.File {
				return written, fmt.Errorf("spool: bad chunk file name %q", c.File)
			}
			if used == len(bufs) {
				bufs = append(bufs, spoolBufs.get())
			}
			if sdir == nil {
				var err error
				if sdir, err = openSpoolDir(dir); err != nil {
					return written, fmt.Errorf("spool: %w", err)
				}
			}
			b, err := sdir.readInto(c.File, bufs[used][:0])
			if err != nil {
				return written, fmt.Errorf("spool: %w", err)
			}
			bufs[used] = b
			used++
			data = b
		default:
			b, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				return written, fmt.Errorf("spool: chunk %s: %w", c.Hash, err)
			}
			data = b
		}
		if int64(len(data)) != c.Stored {
			return written, fmt.Errorf("spool: chunk %s has %d bytes, want %d", c.Hash, len(data), c.Stored)
		}
		if c.Codec == chunk.CodecZstd {
			pending = append(pending, toVerify{c: c, data: data})
		}
		batch = append(batch, carryover.ChunkInput{Hash: c.Hash, Codec: c.Codec, RawLen: c.RawLen, Data: data, Children: c.Children})
		size += len(data)
		if size >= ingestBatchBytes {
			if err := flush(); err != nil {
				return written, err
			}
		}
	}
	return written, flush()
}

// toVerify is a compressed chunk of a batch and its stored bytes.
type toVerify struct {
	c    spoolChunk
	data []byte
}

// verifyBufs keeps the decode buffers of verifyAll's workers between checkpoints (see spoolBufs).
var verifyBufs = bufList{max: maxVerifyWorkers}

// maxVerifyWorkers bounds the goroutines decoding one batch.
const maxVerifyWorkers = 4

// verifyAll checks a batch's compressed chunks (verifyCompressed) on up to one goroutine per CPU:
// decoding is most of a first save's ingest (36.7 MiB of nested records compressed to 7.8 MiB:
// ~25 ms on one core, ~13 on two). The error is the first failing chunk's, in the batch's order.
func verifyAll(vs []toVerify) error {
	workers := min(runtime.GOMAXPROCS(0), len(vs), maxVerifyWorkers)
	errs := make([]error, len(vs))
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := verifyBufs.get()
			defer func() { verifyBufs.put(scratch) }()
			for i := int(next.Add(1)) - 1; i < len(vs); i = int(next.Add(1)) - 1 {
				scratch, errs[i] = verifyCompressed(vs[i].c, vs[i].data, scratch)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// maxSpooledRaw bounds the raw size a kernel may claim for one compressed chunk (chunks are cut at
// persistence.chunk_size; descriptors are small), so a hostile frame cannot make the check below
// inflate gigabytes.
const maxSpooledRaw = 256 << 20

// verifyCompressed decodes a zstd chunk the kernel sent and checks it against its address. A raw
// chunk is checked by every store's put (chunk.Check); a compressed one only when read back, and
// chunks are shared by address across sessions and tenants. Unchecked, a hostile (sandboxed) kernel
// could store garbage under the address of data another session will save later (a zeroed 4 MiB
// chunk has a well-known one): that session's checkpoints would then reference the garbage and fail
// to restore. A thread writing an array while it is spooled is caught the same way: the checkpoint
// fails and says so, the previous one stays, instead of a chunk that does not match its address.
// scratch is reused between calls and returned.
func verifyCompressed(c spoolChunk, data, scratch []byte) ([]byte, error) {
	if c.RawLen < 0 || c.RawLen > maxSpooledRaw {
		return scratch, fmt.Errorf("spool: chunk %s claims %d raw bytes (at most %d)", c.Hash, c.RawLen, maxSpooledRaw)
	}
	raw, err := chunk.Decode(c.Codec, data, scratch[:0])
	if err != nil {
		return scratch, fmt.Errorf("spool: chunk %s: %w", c.Hash, err)
	}
	if err := chunk.Verify(c.Hash, c.RawLen, raw); err != nil {
		return raw, fmt.Errorf("spool: chunk %s does not match its address (was it written while it was saved?): %w", c.Hash, err)
	}
	return raw, nil
}

// spoolDirFD reads chunk files of one spool dir. The kernel writing them may be sandboxed and hostile:
// the dir and the files are opened without following symlinks (a symlink planted in the spool must not
// make the server, root, read a host file into the kernel's checkpoint, which a restore would hand
// back), and only regular files are read (a FIFO would block the server forever).
type spoolDirFD struct {
	fd   int
	path string
}

func openSpoolDir(dir string) (*spoolDirFD, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &spoolDirFD{fd: fd, path: dir}, nil
}

func (d *spoolDirFD) close() {
	if d != nil {
		_ = syscall.Close(d.fd)
	}
}

func (d *spoolDirFD) readInto(name string, buf []byte) ([]byte, error) {
	path := filepath.Join(d.path, name)
	fd, err := syscall.Openat(d.fd, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return buf, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return buf, err
	}
	if !st.Mode().IsRegular() {
		return buf, &os.PathError{Op: "open", Path: path, Err: errors.New("not a regular file")}
	}
	n := int(st.Size())
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(f, buf); err != nil {
		return buf, fmt.Errorf("read %s: %w", path, err)
	}
	return buf, nil
}
