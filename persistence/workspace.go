package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// Workspace files are saved by the server, in Go, straight from the session's host directory: the kernel
// is not involved. Each file is cut into fixed-size chunks; a descriptor chunk lists them and is the
// file's Ref. Fixed-size chunking keeps the hashes of a file's leading chunks when data is appended, so
// appending 1 MB to a 1 GiB file stores about 1 MB.

// DefaultFileChunkSize is the chunk size of workspace files when FileLimits.ChunkSize is 0: big enough
// that reading a chunk back costs one blob lookup per 4 MiB, small enough to hold a few in memory.
const DefaultFileChunkSize = 4 << 20

// FileEntry is one saved workspace file.
type FileEntry struct {
	Path    string    `json:"path"` // slash-separated, relative to the workspace root
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // permission bits
	ModTime time.Time `json:"modified_at"`
	Ref     string    `json:"ref"` // hash of a descriptor chunk: JSON {"size":N,"chunks":["h1",...]}
}

// FileLimits bounds what SnapshotFiles saves; zero limits mean unlimited, a zero ChunkSize the default.
type FileLimits struct {
	SaveHidden                  bool
	MaxFileBytes, MaxTotalBytes int64
	ChunkSize                   int
}

// FilesResult is what SnapshotFiles found and wrote.
type FilesResult struct {
	Files        []FileEntry          // every saved file of the workspace now (changed and unchanged)
	Skipped      []carryover.FileSkip // hidden, over limits, symlinks, special files, unreadable
	Saved        int                  // files whose content was (re)written this time
	BytesWritten int64                // stored bytes newly written
	Roots        []string             // Ref of every entry in Files (for CommitCheckpoint roots)
}

// fileDescriptor is the content of a file's descriptor chunk.
type fileDescriptor struct {
	Size   int64    `json:"size"`
	Chunks []string `json:"chunks"`
}

// Skip reasons other code may match on.
const (
	SkipHidden  = "hidden"
	SkipSymlink = "symlink"
)

// SnapshotFiles walks dir (not following symlinks; a hidden directory is skipped as one entry), reuses
// prev entries whose size and mtime (ns) are unchanged without reading them, and for changed files reads
// them in ChunkSize pieces, hashes each, puts only the missing ones, and writes the descriptor chunk. It
// never holds a whole file in memory. Over-limit files are reported in Skipped, never silently dropped.
//
// The chunks it puts are reachable only once a checkpoint names Roots: call it under Lock, with the
// CommitCheckpoint that follows.
func (s *Store) SnapshotFiles(ctx context.Context, dir string, prev []FileEntry, lim FileLimits) (FilesResult, error) {
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

	// An unchanged file keeps its entry, but only if its descriptor is still stored (a pruned and
	// collected checkpoint may have taken it): otherwise it is read again.
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
	missing, err := s.MissingChunks(ctx, reuse)
	if err != nil {
		return res, fmt.Errorf("snapshot files of %s: %w", dir, err)
	}
	gone := make(map[string]bool, len(missing))
	for _, h := range missing {
		gone[h] = true
	}

	chunkSize := lim.ChunkSize
	if chunkSize <= 0 {
		chunkSize = DefaultFileChunkSize
	}
	w := &chunkWriter{s: s, pending: map[string]bool{}}
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
		e, err := w.saveFile(ctx, root, c, buf)
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
	if err := w.flush(ctx); err != nil {
		return res, fmt.Errorf("snapshot files of %s: %w", dir, err)
	}
	res.BytesWritten = w.written
	for _, e := range res.Files {
		res.Roots = append(res.Roots, e.Ref)
	}
	return res, nil
}

// fileCandidate is a regular file the walk decided to save.
type fileCandidate struct {
	rel   string // slash-separated
	size  int64
	mtime time.Time
	mode  uint32
	prev  *FileEntry // unchanged previous entry, if any
}

// scanWorkspace lists the files to save under root in lexical order and the ones it skips, applying
// the limits: the total budget is spent in walk order, so which files fit is deterministic.
func scanWorkspace(root *os.Root, lim FileLimits) ([]fileCandidate, []carryover.FileSkip, error) {
	var (
		cands   []fileCandidate
		skipped = []carryover.FileSkip{}
		total   int64
	)
	skip := func(rel, reason string) { skipped = append(skipped, carryover.FileSkip{Path: rel, Reason: reason}) }
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return err
			}
			skip(rel, "unreadable: "+err.Error())
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if rel == "." {
			return nil
		}
		if isHidden(d.Name()) && !lim.SaveHidden {
			skip(rel, SkipHidden)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			skip(rel, SkipSymlink)
			return nil
		case d.IsDir():
			return nil
		case !t.IsRegular():
			skip(rel, "special file ("+t.String()+")")
			return nil
		}
		info, err := d.Info()
		if err != nil {
			skip(rel, "unreadable: "+err.Error())
			return nil
		}
		size := info.Size()
		if lim.MaxFileBytes > 0 && size > lim.MaxFileBytes {
			skip(rel, fmt.Sprintf("larger than persistence.max_file_bytes (%d)", lim.MaxFileBytes))
			return nil
		}
		if lim.MaxTotalBytes > 0 && total+size > lim.MaxTotalBytes {
			skip(rel, fmt.Sprintf("workspace over persistence.max_total_bytes (%d)", lim.MaxTotalBytes))
			return nil
		}
		total += size
		cands = append(cands, fileCandidate{rel: rel, size: size, mtime: info.ModTime().UTC(), mode: uint32(info.Mode().Perm())})
		return nil
	})
	return cands, skipped, err
}

func isHidden(name string) bool { return strings.HasPrefix(name, ".") }

// unreadableError marks a file that could not be read: it is skipped and reported, while store errors
// abort the snapshot.
type unreadableError struct{ err error }

func (e *unreadableError) Error() string { return e.err.Error() }

// chunkWriter batches small chunks of many files into one transaction (a descriptor may travel with its
// data chunks: PutChunks checks children at the end of the batch), bounding memory to flushBytes.
type chunkWriter struct {
	s        *Store
	batch    []carryover.ChunkInput
	batchLen int
	pending  map[string]bool // hashes in batch
	written  int64
}

const (
	flushBytes  = 8 << 20
	flushChunks = 256
	directPut   = 1 << 20
)

// add queues raw as a chunk unless it is stored or queued already, and returns its hash. raw is copied
// when kept, so the caller may reuse it.
func (w *chunkWriter) add(ctx context.Context, raw []byte, children []string) (string, error) {
	h := chunk.Hash(raw)
	if w.pending[h] {
		return h, nil
	}
	if ok, err := chunkExists(ctx, w.s.existStmt, h); err != nil {
		return "", err
	} else if ok {
		return h, nil
	}
	c, err := chunk.EncodeHashed(raw, h, children)
	if err != nil {
		return "", err
	}
	if c.Codec == chunk.CodecRaw && len(raw) >= directPut {
		// A big raw chunk goes in on its own, straight from the caller's buffer: no copy of it.
		if err := w.flush(ctx); err != nil {
			return "", err
		}
		n, err := w.s.PutChunks(ctx, []carryover.ChunkInput{c})
		w.written += n
		return h, err
	}
	if c.Codec == chunk.CodecRaw {
		c.Data = append([]byte(nil), raw...)
	}
	w.batch = append(w.batch, c)
	w.batchLen += len(c.Data)
	w.pending[h] = true
	if w.batchLen >= flushBytes || len(w.batch) >= flushChunks {
		return h, w.flush(ctx)
	}
	return h, nil
}

func (w *chunkWriter) flush(ctx context.Context) error {
	if len(w.batch) == 0 {
		return nil
	}
	n, err := w.s.PutChunks(ctx, w.batch)
	if err != nil {
		return err
	}
	w.written += n
	clear(w.batch)
	w.batch, w.batchLen = w.batch[:0], 0
	clear(w.pending)
	return nil
}

// saveFile reads one file chunk by chunk into the store and returns its entry. The recorded size and
// mtime are the ones seen when the file was opened, and the size is what was actually read, so a file
// that changes while being read differs from its entry and is read again next time.
func (w *chunkWriter) saveFile(ctx context.Context, root *os.Root, c fileCandidate, buf []byte) (FileEntry, error) {
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
			h, err := w.add(ctx, buf[:n], nil)
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
	ref, err := w.add(ctx, body, dedupe(desc.Chunks))
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

// RestoreOptions tunes RestoreFilesWith.
type RestoreOptions struct {
	// Prune removes saved-kind files (regular, not hidden, not under a hidden directory) that are not
	// among the entries, and the directories this empties.
	Prune bool
	// Keep lists paths (slash-separated, relative) Prune leaves alone, such as the Skipped paths of the
	// snapshot being restored.
	Keep []string
	// MaxFileBytes, when > 0, makes Prune leave files larger than it alone: they could never have been
	// saved, so removing them would lose data no checkpoint holds.
	MaxFileBytes int64
}

// RestoreFiles writes the given entries into dir (parents created, mode and mtime set), atomically per
// file (temp file + rename). When prune is true, saved-kind files in dir that are not in entries are
// removed (hidden and skipped files are left alone; see RestoreFilesWith to name the skipped ones).
func (s *Store) RestoreFiles(ctx context.Context, dir string, entries []FileEntry, prune bool) error {
	return s.RestoreFilesWith(ctx, dir, entries, RestoreOptions{Prune: prune})
}

// RestoreFilesWith is RestoreFiles with options. A file already in dir with the entry's size and mtime
// is taken as restored (only its mode is fixed), the same trust SnapshotFiles puts in them, so rolling a
// live workspace back rewrites only what changed. All access goes through an os.Root: a symlink in the
// workspace cannot make the restore write outside dir.
func (s *Store) RestoreFilesWith(ctx context.Context, dir string, entries []FileEntry, opt RestoreOptions) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("restore files: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("restore files: %w", err)
	}
	defer root.Close()
	want := make(map[string]bool, len(entries))
	for _, e := range entries {
		if !filepath.IsLocal(filepath.FromSlash(e.Path)) || path.Clean(e.Path) != e.Path {
			return fmt.Errorf("restore files into %s: entry path %q is not a clean relative path", dir, e.Path)
		}
		want[e.Path] = true
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("restore files into %s: %w", dir, err)
		}
		if err := s.restoreFile(ctx, root, e); err != nil {
			return fmt.Errorf("restore files into %s: %s: %w", dir, e.Path, err)
		}
	}
	if opt.Prune {
		for _, k := range opt.Keep {
			want[k] = true
		}
		if err := pruneWorkspace(root, want, opt.MaxFileBytes); err != nil {
			return fmt.Errorf("restore files into %s: prune: %w", dir, err)
		}
	}
	return nil
}

// restoreFile writes one entry through a hidden temp file renamed into place, so a reader (or a crash)
// sees the old file or the new one, never a mix.
func (s *Store) restoreFile(ctx context.Context, root *os.Root, e FileEntry) error {
	name := filepath.FromSlash(e.Path)
	mode := fs.FileMode(e.Mode).Perm()
	if fi, err := root.Lstat(name); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("a directory is in the way")
		}
		if fi.Mode().IsRegular() && fi.Size() == e.Size && fi.ModTime().UnixNano() == e.ModTime.UnixNano() {
			if fi.Mode().Perm() != mode {
				return root.Chmod(name, mode)
			}
			return nil
		}
	}
	desc, err := s.readDescriptor(ctx, e.Ref)
	if err != nil {
		return err
	}
	if desc.Size != e.Size {
		return fmt.Errorf("descriptor %s says %d bytes, entry %d", e.Ref, desc.Size, e.Size)
	}
	if parent := filepath.Dir(name); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return err
		}
	}
	tmp := filepath.Join(filepath.Dir(name), fmt.Sprintf(".carryover-restore-%d-%d.tmp", os.Getpid(), time.Now().UnixNano()))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			root.Remove(tmp)
		}
	}()
	var n int64
	for _, h := range desc.Chunks {
		m, err := s.ReadChunkTo(ctx, h, f)
		if err != nil {
			return err
		}
		n += m
	}
	if n != e.Size {
		return fmt.Errorf("wrote %d bytes, want %d", n, e.Size)
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := root.Chtimes(tmp, e.ModTime, e.ModTime); err != nil {
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		return err
	}
	done = true
	return nil
}

func (s *Store) readDescriptor(ctx context.Context, ref string) (fileDescriptor, error) {
	var d fileDescriptor
	b, err := s.ReadChunk(ctx, ref, nil)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("descriptor %s: %w", ref, err)
	}
	return d, nil
}

// pruneWorkspace removes the saved-kind files under root that are not in keep, then the directories
// that removal emptied (deepest first); directories that were empty before are left as they are.
func pruneWorkspace(root *os.Root, keep map[string]bool, maxFileBytes int64) error {
	var removed []string
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if isHidden(d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || keep[rel] {
			return nil
		}
		if maxFileBytes > 0 {
			if info, err := d.Info(); err != nil || info.Size() > maxFileBytes {
				return nil
			}
		}
		if err := root.Remove(filepath.FromSlash(rel)); err != nil {
			return err
		}
		removed = append(removed, rel)
		return nil
	})
	if err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, rel := range removed {
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	ordered := make([]string, 0, len(dirs))
	for d := range dirs {
		ordered = append(ordered, d)
	}
	sort.Slice(ordered, func(i, j int) bool { return len(ordered[i]) > len(ordered[j]) })
	for _, d := range ordered {
		// Remove fails on a directory that still holds something: that is the "left alone" case.
		_ = root.Remove(filepath.FromSlash(d))
	}
	return nil
}
