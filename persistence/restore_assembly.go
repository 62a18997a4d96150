package persistence

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
)

// assembleJob writes chunks, in order, into one spool file.
type assembleJob struct {
	path     string
	chunks   []descChunk
	size     int64 // the chunks' bytes, written from offset 0
	fileSize int64 // the file's size when larger than size (the first part of a split buffer)
	lazy     int   // 1 + the index of the lazy buffer this job assembles (run when it cannot be mapped lazily), -1 - the index of the shared one; 0: none
	rank     int   // when it is assembled: rankFirst, rankPickle or rankBuffer
}

// The order spool files are assembled in, so that a restore into a new kernel loads groups while
// the last files are written (assembleWhileLoading): the files definitions and settings need
// (loaded first), then the data groups' pickle streams and small buffers (a container's slices,
// each a pickle stream: unpickling is a load's CPU, and a group of nested records most of a
// data-science load), then the data groups' large buffers (mapped, not read, by the load). The
// agent loads each data group once its files are all there.
const (
	rankFirst = iota
	rankPickle
	rankBuffer
)

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

// abortMark is the file a failed assembly leaves in the spool dir: the agent, loading while the
// assembly runs, stops waiting for files that will not come and fails the restore.
const abortMark = "assembly-failed"

// abortGrace is how long the load may go on after the assembly failed: the agent stops within
// milliseconds of the mark; past this the call is given up (the kernel, new, is stopped anyway).
var abortGrace = 10 * time.Second

// assembleWhileLoading runs the assembly beside load (the agent's restore call, told to wait for
// each file it opens, in the spool dir hostDir), instead of before it: a new kernel loads the first
// groups while the last files are written. Only for a kernel no user code ran in: its namespace is
// cleared before every chunk is read, and a failed restore stops it. It returns when the assembly
// was done and the first error: the assembly's (when load failed because of it) before load's.
func assembleWhileLoading(ctx context.Context, r carryover.ChunkReader, jobs []assembleJob, hostDir string, load func(context.Context) error) (time.Time, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	var (
		cause atomic.Pointer[error] // set before the mark is written: load's error, if the mark caused it, finds it
		done  = make(chan error, 1)
		end   time.Time
	)
	go func() {
		err := runAssembly(actx, r, jobs)
		end = time.Now()
		if err != nil {
			cause.Store(&err)
			abortLoad(hostDir, err)
			time.AfterFunc(abortGrace, lcancel)
		}
		done <- err
	}()
	lerr := load(lctx)
	failed := cause.Load() // the assembly failed before load returned: its error is the cause
	if lerr != nil {
		cancel() // the agent gave up: the files it waited for are not needed
	}
	aerr := <-done
	switch {
	case failed != nil:
		return end, *failed
	case lerr != nil:
		return end, lerr
	}
	return end, aerr
}

// abortLoad tells the agent waiting in hostDir that its files will not come: the mark, or, when
// even that cannot be written (a full spool), the dir's removal, which the agent takes the same way.
func abortLoad(hostDir string, err error) {
	if os.WriteFile(filepath.Join(hostDir, abortMark), []byte(err.Error()), 0o600) != nil {
		os.RemoveAll(hostDir)
	}
}

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
	f    *spoolFile
	hash string
	off  int64
	n    int64
}

// spoolFile is one assembled file, written under a temporary name and renamed to its path once its
// last piece is in: whoever finds the path finds the whole file (the agent, loading while the
// assembly runs, waits for each of a group's paths).
type spoolFile struct {
	*os.File
	path string       // "": not published (a memfd)
	left atomic.Int64 // pieces not written yet
}

// wrote counts one piece written, and publishes the file after its last.
func (f *spoolFile) wrote() error {
	if f.left.Add(-1) != 0 {
		return nil
	}
	return f.publish()
}

func (f *spoolFile) publish() error {
	if f.path == "" {
		return nil
	}
	if err := os.Rename(f.Name(), f.path); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

// partSuffix names a spool file still being written.
const partSuffix = ".part"

// openAssembly creates the jobs' files at their final sizes (under temporary names: spoolFile) and
// lists where each chunk goes, the jobs taken by rank. The files it returns are the caller's to
// close, also on error.
func openAssembly(jobs []assembleJob) ([]piece, []*spoolFile, error) {
	var (
		files []*spoolFile
		each  [][]piece
	)
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b assembleJob) int { return cmp.Compare(a.rank, b.rank) })
	for _, j := range jobs {
		f, err := os.OpenFile(j.path+partSuffix, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, files, fmt.Errorf("spool: %w", err)
		}
		sf := &spoolFile{File: f, path: j.path}
		files = append(files, sf)
		if err := f.Truncate(max(j.size, j.fileSize)); err != nil {
			return nil, files, fmt.Errorf("spool: %w", err)
		}
		var (
			off int64
			ps  []piece
		)
		for _, ch := range j.chunks {
			ps = append(ps, piece{f: sf, hash: ch.Hash, off: off, n: ch.Len})
			off += ch.Len
		}
		if off != j.size {
			return nil, files, fmt.Errorf("spool: %s: chunks hold %d bytes, descriptor says %d", j.path, off, j.size)
		}
		sf.left.Store(int64(len(ps)))
		if len(ps) == 0 {
			if err := sf.publish(); err != nil {
				return nil, files, err
			}
		}
		each = append(each, ps)
	}
	return inTurns(each, assembleWorkers), files, nil
}

// inTurns lists the files' pieces in turns among width files at a time (the first piece of each,
// then the second, ...; a finished file's place taken by the next file): the workers, taking pieces
// in order, write different files at once (one file's writes hold its inode lock), and the files
// are done in their order, not all at the end.
func inTurns(each [][]piece, width int) []piece {
	var (
		out    []piece
		active [][]piece
		next   int
	)
	for {
		for len(active) < width && next < len(each) {
			if len(each[next]) > 0 {
				active = append(active, each[next])
			}
			next++
		}
		if len(active) == 0 {
			return out
		}
		kept := active[:0]
		for _, ps := range active {
			out = append(out, ps[0])
			if len(ps) > 1 {
				kept = append(kept, ps[1:])
			}
		}
		active = kept
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
		if err == nil {
			err = p.f.wrote()
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
		if err := p.f.wrote(); err != nil {
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
