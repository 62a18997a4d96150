package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/carryover/carryover"
	"golang.org/x/sys/unix"
)

// SnapshotFiles walks dir (not following symlinks; a hidden directory is skipped as one entry), reuses
// prev entries whose size and mtime (ns) are unchanged without reading them, and for changed files reads
// them in ChunkSize pieces, hashes each, puts only the missing ones, and writes the descriptor chunk. It
// never holds a whole file in memory. Over-limit files are reported in Skipped, never silently dropped.
//
// It puts chunks through w: they are reachable only once a checkpoint names Roots, so w is the
// CheckpointWriter whose Commit follows.
func SnapshotFiles(ctx context.Context, w carryover.ChunkWriter, dir string, prev []FileEntry, lim FileLimits) (FilesResult, error) {
	return snapshotFiles(ctx, w, dir, prev, nil, lim)
}

// snapshotFiles is SnapshotFiles whose prev entries are those of a committed checkpoint whose roots
// are prevRoots (nil: not known): see markUnchanged.
func snapshotFiles(ctx context.Context, w carryover.ChunkWriter, dir string, prev []FileEntry, prevRoots []string, lim FileLimits) (FilesResult, error) {
	res := FilesResult{Files: []FileEntry{}, Skipped: []carryover.FileSkip{}, Roots: []string{}}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return res, fmt.Errorf("snapshot files: %w", err)
	}
	defer root.Close()

	cands, skipped, err := scanWorkspace(root, lim)
	if err != nil {
		return res, fmt.Errorf("snapshot files of %s: %w", dir, err)
	}
	res.Skipped = skipped

	gone, err := markUnchanged(ctx, w, cands, prev, prevRoots)
	if err != nil {
		return res, fmt.Errorf("snapshot files of %s: %w", dir, err)
	}
	chunkSize := lim.ChunkSize
	if chunkSize <= 0 {
		chunkSize = DefaultFileChunkSize
	}
	b := &chunkBatch{w: w, pending: map[string]bool{}}
	var buf []byte // allocated only when some file must be read: most turns change no file
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("snapshot files of %s: %w", dir, err)
		}
		if c.prev != nil && !gone[c.prev.Ref] {
			e := *c.prev
			e.Mode = c.mode // chmod does not touch mtime
			res.Files = append(res.Files, e)
			continue
		}
		if buf == nil {
			buf = make([]byte, chunkSize)
		}
		e, err := b.saveFile(ctx, root, c, buf)
		var unreadable *unreadableError
		if errors.As(err, &unreadable) {
			res.Skipped = append(res.Skipped, carryover.FileSkip{Path: c.rel, Reason: "unreadable: " + unreadable.err.Error()})
			continue
		}
		if err != nil {
			return res, fmt.Errorf("snapshot files of %s: %s: %w", dir, c.rel, err)
		}
		if c.prev == nil || c.prev.Ref != e.Ref {
			res.Saved++
		}
		res.Files = append(res.Files, e)
	}
	if err := b.flush(ctx); err != nil {
		return res, fmt.Errorf("snapshot files of %s: %w", dir, err)
	}
	refs := make([]string, len(res.Files))
	for i, e := range res.Files {
		refs[i] = e.Ref
	}
	if res.Roots, err = fileRoots(ctx, b, refs); err != nil {
		return res, fmt.Errorf("snapshot files of %s: index: %w", dir, err)
	}
	res.BytesWritten = b.written
	if lim.Sync && (res.Saved > 0 || len(res.Files) != len(prev) || changedPaths(res.Files, prev)) {
		if err := syncRoot(root); err != nil {
			return res, fmt.Errorf("snapshot files of %s: %w", dir, &SyncError{Err: err})
		}
	}
	return res, nil
}

// markUnchanged points each candidate whose size and mtime (ns) match its prev entry at that entry,
// and returns the refs of those entries that are no longer stored (a pruned and collected checkpoint
// may have taken them): their files are read again rather than trusted. When prev are the entries of
// a committed checkpoint whose roots (prevRoots) are all stored, every entry's ref is too (a stored
// chunk's children are, and GC takes only what no root reaches): the roots are asked, one query of a
// few hashes, not every reused ref (10,000 files: 25-30 ms a turn).
func markUnchanged(ctx context.Context, r carryover.ChunkReader, cands []fileCandidate, prev []FileEntry, prevRoots []string) (map[string]bool, error) {
	prevBy := make(map[string]FileEntry, len(prev))
	for _, e := range prev {
		prevBy[e.Path] = e
	}
	var reuse []string
	for i := range cands {
		if p, ok := prevBy[cands[i].rel]; ok && p.Ref != "" && p.Size == cands[i].size && p.ModTime.UnixNano() == cands[i].mtime.UnixNano() {
			cands[i].prev = &p
			reuse = append(reuse, p.Ref)
		}
	}
	if len(reuse) == 0 { // nothing trusted from prev: nothing to ask (an empty workspace's every turn)
		return map[string]bool{}, nil
	}
	if len(prevRoots) > 0 {
		missing, err := r.MissingChunks(ctx, prevRoots)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			return map[string]bool{}, nil
		}
	}
	missing, err := r.MissingChunks(ctx, reuse)
	if err != nil {
		return nil, err
	}
	gone := make(map[string]bool, len(missing))
	for _, h := range missing {
		gone[h] = true
	}
	return gone, nil
}

// fileCandidate is a regular file the walk decided to save.
type fileCandidate struct {
	rel   string // slash-separated
	size  int64
	mtime time.Time
	mode  uint32
	prev  *FileEntry // unchanged previous entry, if any
}

// saveFile reads one file chunk by chunk into the store and returns its entry. The recorded size and
// mtime are the ones seen when the file was opened, and the size is what was actually read, so a file
// that changes while being read differs from its entry and is read again next time.
func (b *chunkBatch) saveFile(ctx context.Context, root *os.Root, c fileCandidate, buf []byte) (FileEntry, error) {
	// O_NONBLOCK: a (sandboxed) kernel swapping the file for a FIFO after the scan must not block the
	// open forever; the check below then refuses it.
	f, err := root.OpenFile(filepath.FromSlash(c.rel), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return FileEntry{}, &unreadableError{err}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return FileEntry{}, &unreadableError{err}
	}
	if !info.Mode().IsRegular() {
		return FileEntry{}, &unreadableError{fmt.Errorf("no longer a regular file")}
	}
	desc := fileDescriptor{Chunks: []string{}}
	for {
		if err := ctx.Err(); err != nil {
			return FileEntry{}, err
		}
		n, rerr := io.ReadFull(f, buf)
		if n > 0 {
			h, err := b.add(ctx, buf[:n], nil)
			if err != nil {
				return FileEntry{}, err
			}
			desc.Chunks = append(desc.Chunks, h)
			desc.Size += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return FileEntry{}, &unreadableError{rerr}
		}
	}
	body, err := json.Marshal(desc)
	if err != nil {
		return FileEntry{}, fmt.Errorf("descriptor: %w", err)
	}
	ref, err := b.add(ctx, body, dedupe(desc.Chunks))
	if err != nil {
		return FileEntry{}, err
	}
	return FileEntry{
		Path:    c.rel,
		Size:    desc.Size,
		Mode:    uint32(info.Mode().Perm()),
		ModTime: info.ModTime().UTC(),
		Ref:     ref,
	}, nil
}

// dedupe returns hs without repeats, first occurrence kept.
func dedupe(hs []string) []string {
	seen := make(map[string]bool, len(hs))
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// changedPaths tells whether files names a path prev does not (a rename onto an unchanged size and
// mtime reuses the entry without reading it, so Saved does not count it).
func changedPaths(files, prev []FileEntry) bool {
	had := make(map[string]bool, len(prev))
	for _, e := range prev {
		had[e.Path] = true
	}
	for _, e := range files {
		if !had[e.Path] {
			return true
		}
	}
	return false
}

// syncRoot commits the filesystem holding root (data, names, deletions: syncfs(2)).
// SyncError is a workspace's file system failing the checkpoint's sync: it lost writes the page
// cache still shows (an I/O error of the disk under it), so the files read for the checkpoint may
// not be on it. The session service hands it to the workspace disk's repair (kernel/sandbox).
type SyncError struct{ Err error }

func (e *SyncError) Error() string { return "sync: " + e.Err.Error() }
func (e *SyncError) Unwrap() error { return e.Err }

func syncRoot(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}
