package persistence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover"
)

// Shared buffers. Children of one fork each restore the same checkpoint; restored privately (lazily
// filled anonymous memory, or a spool file of their own), 100 children of a session holding a 1 GiB
// array held 100 GiB. Instead, a large buffer is decoded once into a sealed memfd (content-addressed
// by its chunks' digests, so any restore of the same bytes finds it), which each kernel maps
// copy-on-write (MAP_PRIVATE): every kernel reads the one copy, and a page a kernel writes becomes
// its own. The seals (no write, grow or shrink, ever) make the copy immutable for every holder, the
// server included, so a hostile kernel handed the descriptor cannot change what its siblings read.
//
// Lifetime: the server keeps a copy's descriptor while some kernel that was handed it lives (each
// hand-off keeps a unix socket to the agent open; its end closes when the kernel exits), so the next
// child finds it. The memory itself is Linux's to free: a memfd's pages go when the last descriptor
// and the last mapping go. Nothing is on disk, so a crash or a restart of the server leaks nothing.

// sharedBufferMin is the size from which a buffer is shared.
var sharedBufferMin atomic.Int64

func init() { sharedBufferMin.Store(64 << 20) }

// SharedBuffers is a node's copies of large restored buffers. The zero value is not usable: use
// NewSharedBuffers.
type SharedBuffers struct {
	mu   sync.Mutex
	bufs map[string]*sharedBuf
}

// NewSharedBuffers is an empty cache.
func NewSharedBuffers() *SharedBuffers {
	return &SharedBuffers{bufs: map[string]*sharedBuf{}}
}

// sharedBuf is one copy: filled once (ready closed), then f is the sealed memfd or err says why not.
type sharedBuf struct {
	key   string
	n     int64
	ready chan struct{}
	f     *os.File
	err   error
	refs  int // kernels handed it (and restores in progress that will be)
}

// has reports whether a copy of key is held (filled or being filled).
func (s *SharedBuffers) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.bufs[key]
	return ok
}

// Held is how many copies the node holds and their bytes (tests, metrics).
func (s *SharedBuffers) Held() (n int, bytes int64) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bufs {
		n++
		bytes += b.n
	}
	return n, bytes
}

// sharedKey addresses a buffer by its chunks: their digests and lengths, in order.
func sharedKey(chunks []descChunk) string {
	h := sha256.New()
	for _, ch := range chunks {
		h.Write([]byte(ch.Hash))
		h.Write([]byte{':'})
		h.Write(strconv.AppendInt(nil, ch.Len, 10))
		h.Write([]byte{','})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// sharedEligible: large, and its chunks hold its length.
func sharedEligible(b descBuffer) bool {
	return b.Len >= sharedBufferMin.Load() && chunksLen(b.Chunks) == b.Len
}

// acquire returns the copy of a buffer (its chunks, n bytes), filling it from r when no kernel holds
// one, and counts a reference the caller must release. Concurrent callers wait for one fill.
func (s *SharedBuffers) acquire(ctx context.Context, r carryover.ChunkReader, chunks []descChunk, n int64) (*sharedBuf, error) {
	key := sharedKey(chunks)
	s.mu.Lock()
	b, ok := s.bufs[key]
	if !ok {
		b = &sharedBuf{key: key, n: n, ready: make(chan struct{})}
		s.bufs[key] = b
	}
	b.refs++
	s.mu.Unlock()
	if !ok {
		b.f, b.err = fillMemfd(ctx, r, chunks, n)
		if b.err != nil {
			s.mu.Lock()
			delete(s.bufs, key) // the next restore tries again
			s.mu.Unlock()
		}
		close(b.ready)
	}
	select {
	case <-b.ready:
	case <-ctx.Done():
		s.release(b)
		return nil, ctx.Err()
	}
	if b.err != nil {
		s.release(b)
		return nil, b.err
	}
	return b, nil
}

// release drops one reference; the last one closes the server's descriptor (the kernels' mappings
// keep the pages they map until they go).
func (s *SharedBuffers) release(b *sharedBuf) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.refs--
	if b.refs > 0 {
		return
	}
	if s.bufs[b.key] == b {
		delete(s.bufs, b.key)
	}
	select {
	case <-b.ready:
		if b.f != nil {
			b.f.Close()
		}
	default: // the filler closes it when done (refs 0 means it failed or was abandoned)
	}
}

// memfdSeals make a filled copy immutable: no write (MAP_PRIVATE mappings, which never write
// back, are still allowed), no resize, no further change of the seals.
const memfdSeals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

// fillMemfd decodes a buffer's chunks into a new sealed memfd of n bytes.
func fillMemfd(ctx context.Context, r carryover.ChunkReader, chunks []descChunk, n int64) (*os.File, error) {
	fd, err := unix.MemfdCreate("carryover-buf", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shared buffer: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:carryover-buf")
	fail := func(err error) (*os.File, error) {
		f.Close()
		return nil, fmt.Errorf("shared buffer: %w", err)
	}
	if err := f.Truncate(n); err != nil {
		return fail(err)
	}
	var (
		ps  []piece
		off int64
		sf  = &spoolFile{File: f} // no path: never renamed
	)
	for _, ch := range chunks {
		ps = append(ps, piece{f: sf, hash: ch.Hash, off: off, n: ch.Len})
		off += ch.Len
	}
	if off != n {
		return fail(fmt.Errorf("chunks hold %d bytes, descriptor says %d", off, n))
	}
	if err := copyPieces(ctx, r, ps); err != nil {
		return fail(err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, memfdSeals); err != nil {
		return fail(fmt.Errorf("seal: %w", err))
	}
	return f, nil
}
