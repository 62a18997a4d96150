package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
)

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

// RestoreFiles writes the given entries into dir, reading their chunks from r, (parents created, mode and mtime set), atomically per
// file (temp file + rename). When prune is true, saved-kind files in dir that are not in entries are
// removed (hidden and skipped files are left alone; see RestoreFilesWith to name the skipped ones).
func RestoreFiles(ctx context.Context, r carryover.ChunkReader, dir string, entries []FileEntry, prune bool) error {
	return RestoreFilesWith(ctx, r, dir, entries, RestoreOptions{Prune: prune})
}

// RestoreFilesWith is RestoreFiles with options. A file already in dir with the entry's size and mtime
// is taken as restored (only its mode is fixed), the same trust SnapshotFiles puts in them, so rolling a
// live workspace back rewrites only what changed. All access goes through an os.Root: a symlink in the
// workspace cannot make the restore write outside dir.
func RestoreFilesWith(ctx context.Context, r carryover.ChunkReader, dir string, entries []FileEntry, opt RestoreOptions) error {
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
		if err := restoreFile(ctx, r, root, e); err != nil {
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
func restoreFile(ctx context.Context, r carryover.ChunkReader, root *os.Root, e FileEntry) error {
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
	desc, err := readDescriptor(ctx, r, e.Ref)
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
		m, err := r.ReadChunkTo(ctx, h, f)
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

func readDescriptor(ctx context.Context, r carryover.ChunkReader, ref string) (fileDescriptor, error) {
	var d fileDescriptor
	b, err := r.ReadChunk(ctx, ref, nil)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("descriptor %s: %w", ref, err)
	}
	return d, nil
}
