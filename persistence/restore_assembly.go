package persistence

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/carryover/carryover"
)

// assembleJob writes chunks, in order, into one spool file.
type assembleJob struct {
	path     string
	chunks   []descChunk
	size     int64 // the chunks' bytes, written from offset 0
	fileSize int64 // the file's size when larger than size (the first part of a split buffer)
	lazy     int   // 1 + the index of the lazy buffer this job assembles (run when it cannot be mapped lazily), -1 - the index of the shared one; 0: none
}

// splitBufferMin is the size from which a buffer is assembled as several files, one per assembly
// worker. Writes into one tmpfs file hold its inode lock, and allocating its pages is most of their
// cost (1 GiB: `fallocate` 0.25 s, the copy 0.09 s on the 2-core VM), so one file's pages are
// allocated one at a time however many workers copy; two files are written in 0.19 s against 0.37 s.
var splitBufferMin atomic.Int64

func init() { splitBufferMin.Store(64 << 20) }

// bufSplit is one part of a buffer: its chunks and where they start.
type bufSplit struct {
	off, size int64
	chunks    []descChunk
}

// splitBuffer cuts a buffer of total bytes into up to assembleWorkers parts of about equal size, at
// chunk boundaries that are multiples of pageSize (a part is mapped at its offset, which must be
// page-aligned). A buffer under splitBufferMin, or with no such boundary, is one part; so is one
// whose chunks do not hold total bytes, which openAssembly then refuses (split, the first file's
// tail would be a hole read as zeros).
func splitBuffer(chunks []descChunk, total int64, pageSize int) []bufSplit {
	whole := []bufSplit{{size: total, chunks: chunks}}
	if total < splitBufferMin.Load() || assembleWorkers < 2 || chunksLen(chunks) != total {
		return whole
	}
	parts := []bufSplit{{}}
	var off int64
	for _, ch := range chunks {
		cur := &parts[len(parts)-1]
		due := total * int64(len(parts)) / assembleWorkers
		if off >= due && len(cur.chunks) > 0 && off%int64(pageSize) == 0 && len(parts) < assembleWorkers {
			parts = append(parts, bufSplit{off: off})
			cur = &parts[len(parts)-1]
		}
		cur.chunks = append(cur.chunks, ch)
		cur.size += ch.Len
		off += ch.Len
	}
	return parts
}

func chunksLen(chunks []descChunk) (n int64) {
	for _, ch := range chunks {
		n += ch.Len
	}
	return n
}

// assembleWorkers read chunks from the store and write them into spool files concurrently: on two cores
// the blob read and the page-cache write overlap, keeping a restore near the cost of the read alone.
const assembleWorkers = 2

// runAssembly creates every file at its final size, then copies chunks straight from the store into
// them at their offsets (ReadChunkTo: no intermediate buffer for raw chunks).
func runAssembly(ctx context.Context, r carryover.ChunkReader, jobs []assembleJob) error {
	pieces, files, err := openAssembly(jobs)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		return err
	}
	return copyPieces(ctx, readerFor(ctx, r, pieces), pieces)
}

// readerFor is r, or, when r can look chunks up ahead (carryover.ChunkCataloger: PostgreSQL, a
// round trip a look-up), a reader that looked pieces' chunks up in one. A failed look-up leaves r:
// each read looks its chunk up again, and fails as it would have.
func readerFor(ctx context.Context, r carryover.ChunkReader, pieces []piece) carryover.ChunkReader {
	cat, ok := r.(carryover.ChunkCataloger)
	if !ok || len(pieces) < 2 {
		return r
	}
	hashes := make([]string, len(pieces))
	for i, p := range pieces {
		hashes[i] = p.hash
	}
	if ahead, err := cat.ReaderFor(ctx, hashes); err == nil {
		return ahead
	}
	return r
}

// piece is one chunk's place in an assembled file.
type piece struct {
	f    *os.File
	hash string
	off  int64
	n    int64
}

// openAssembly creates the jobs' files at their final sizes and lists where each chunk goes. The files
// it returns are the caller's to close, also on error.
func openAssembly(jobs []assembleJob) ([]piece, []*os.File, error) {
	var (
		files []*os.File
		each  [][]piece
	)
	for _, j := range jobs {
		f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, files, fmt.Errorf("spool: %w", err)
		}
		files = append(files, f)
		if err := f.Truncate(max(j.size, j.fileSize)); err != nil {
			return nil, files, fmt.Errorf("spool: %w", err)
		}
		var (
			off int64
			ps  []piece
		)
		for _, ch := range j.chunks {
			ps = append(ps, piece{f: f, hash: ch.Hash, off: off, n: ch.Len})
			off += ch.Len
		}
		if off != j.size {
			return nil, files, fmt.Errorf("spool: %s: chunks hold %d bytes, descriptor says %d", j.path, off, j.size)
		}
		each = append(each, ps)
	}
	return interleave(each), files, nil
}

// interleave lists the files' pieces in turns (the first of each file, then the second of each, ...),
// so the workers, taking pieces in order, write different files at once: one file's writes hold its
// inode lock.
func interleave(each [][]piece) []piece {
	var out []piece
	for k := 0; ; k++ {
		n := len(out)
		for _, ps := range each {
			if k < len(ps) {
				out = append(out, ps[k])
			}
		}
		if len(out) == n {
			return out
		}
	}
}

// samePieces are the places of one chunk in the assembled files: a chunk that recurs (zeros, a
// repeated block, np.ones) is read, decoded and verified once, then written to each place.
type samePieces []piece

// byChunk groups pieces by chunk, in their first order.
func byChunk(pieces []piece) []samePieces {
	at := make(map[string]int, len(pieces))
	var out []samePieces
	for _, p := range pieces {
		if i, ok := at[p.hash]; ok {
			out[i] = append(out[i], p)
			continue
		}
		at[p.hash] = len(out)
		out = append(out, samePieces{p})
	}
	return out
}

// copyChunk writes one chunk to its places: straight from the store to a single place (ReadChunkTo:
// no intermediate buffer for raw chunks), through buf to several.
func copyChunk(ctx context.Context, r carryover.ChunkReader, ps samePieces, buf []byte) ([]byte, error) {
	if len(ps) == 1 {
		p := ps[0]
		n, err := r.ReadChunkTo(ctx, p.hash, io.NewOffsetWriter(p.f, p.off))
		if err == nil && n != p.n {
			err = fmt.Errorf("chunk %s: %d bytes, want %d", p.hash, n, p.n)
		}
		return buf, err
	}
	buf, err := r.ReadChunk(ctx, ps[0].hash, buf[:0])
	if err != nil {
		return buf, err
	}
	for _, p := range ps {
		if int64(len(buf)) != p.n {
			return buf, fmt.Errorf("chunk %s: %d bytes, want %d", p.hash, len(buf), p.n)
		}
		if _, err := p.f.WriteAt(buf, p.off); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// copyPieces copies the pieces with assembleWorkers workers; the first error stops them all.
func copyPieces(ctx context.Context, r carryover.ChunkReader, pieces []piece) error {
	err := inParallel(ctx, assembleWorkers, byChunk(pieces), func() func(context.Context, samePieces) error {
		var buf []byte // the worker's own, reused from one chunk to the next
		return func(ctx context.Context, ps samePieces) (err error) {
			buf, err = copyChunk(ctx, r, ps, buf)
			return err
		}
	})
	if err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	return nil
}

// inParallel runs a worker's func (newWorker makes one per worker: its own buffers) on each item,
// workers at once, and returns the first error, which cancels the rest (their errors, caused by it,
// are dropped), or the parent's once it is done.
func inParallel[T any](parent context.Context, workers int, items []T, newWorker func() func(context.Context, T) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	next := make(chan T)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for w := 0; w < min(workers, len(items)); w++ {
		wg.Add(1)
		do := newWorker()
		go func() {
			defer wg.Done()
			for it := range next {
				if err := do(ctx, it); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
	for _, it := range items {
		select {
		case next <- it:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return parent.Err()
}
