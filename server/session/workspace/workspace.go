// Package workspace is the files API of a session's workspace directory: list, read, write and
// delete its files. All file access goes through os.Root, which refuses to leave the workspace by
// "..", absolute paths or symlinks (a symlink inside the workspace pointing at /etc/passwd is not
// followed out).
package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/carryover/carryover"
)

// FileInfo is an item of GET .../files (and of the skills' list).
type FileInfo struct {
	Path       string    `json:"path"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
}

// Dir is a workspace directory on the host; each call opens it anew.
type Dir string

// PathError is err, an error of a file operation on path p of the workspace, as the API answers
// it: not_found, or invalid for a path of the wrong shape or one that escapes the workspace.
func PathError(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return carryover.Errorf(carryover.CodeNotFound, "file %q not found", p).WithDetails("path", p)
	case errors.Is(err, fs.ErrPermission):
		return carryover.Errorf(carryover.CodeInvalid, "file %q is not accessible", p).WithDetails("path", p)
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.EINVAL):
		// The path's shape, not the server, is at fault: a name too long, a file where a directory
		// must be (or the reverse), a symlink loop.
		return carryover.Errorf(carryover.CodeInvalid, "path %q cannot be used: %v", p, unwrapPathErr(err)).WithDetails("path", p)
	default:
		if escapes(err) {
			return carryover.Errorf(carryover.CodeInvalid, "path %q escapes the workspace", p).WithDetails("path", p)
		}
		return err
	}
}

// escapes reports whether err is os.Root's refusal to leave the workspace, at any depth: MkdirAll
// through a symlinked directory wraps it twice ("mkdirat d: statat d: path escapes from parent").
func escapes(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if pe, ok := err.(*fs.PathError); ok && pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// unwrapPathErr is the errno of a *fs.PathError (without the host path), else err.
func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err != nil {
		return pe.Err
	}
	return err
}

// List lists every regular file of the workspace.
func (d Dir) List() ([]FileInfo, error) {
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := []FileInfo{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped, not fatal
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		out = append(out, FileInfo{Path: p, Size: info.Size(), ModifiedAt: info.ModTime().UTC()})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// Read opens a workspace file for reading.
func (d Dir) Read(p string) (*os.File, fs.FileInfo, error) {
	rel, err := carryover.WorkspacePath(p)
	if err != nil {
		return nil, nil, err
	}
	if rel == "" {
		return nil, nil, carryover.Errorf(carryover.CodeInvalid, "a file path is required")
	}
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	// O_NONBLOCK: a FIFO a kernel made would otherwise block the open forever (it is refused below).
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, PathError(p, err)
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, carryover.Errorf(carryover.CodeInvalid, "%q is not a regular file", p).WithDetails("path", p)
	}
	return f, info, nil
}

// Write writes r, of size bytes (-1: unknown), to a workspace file (parents created), atomically
// via a temp file + rename. A size the disk has no room for is refused first (full.go).
func (d Dir) Write(p string, r io.Reader, size int64) (FileInfo, error) {
	rel, err := carryover.WorkspacePath(p)
	if err != nil {
		return FileInfo{}, err
	}
	if rel == "" {
		return FileInfo{}, carryover.Errorf(carryover.CodeInvalid, "a file path is required")
	}
	if strings.HasSuffix(p, "/") { // "dir/" names a directory: it was written as a file "dir"
		return FileInfo{}, carryover.Errorf(carryover.CodeInvalid, "%q names a directory: a file path is required", p).WithDetails("path", p)
	}
	if err := d.checkRoom(p, size); err != nil {
		return FileInfo{}, err
	}
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return FileInfo{}, err
	}
	defer root.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return FileInfo{}, d.writeError(p, err)
		}
	}
	if info, err := root.Lstat(rel); err == nil && info.IsDir() {
		// refused before the upload (the rename's error named the temp file)
		return FileInfo{}, carryover.Errorf(carryover.CodeInvalid, "%q is a directory", p).WithDetails("path", p)
	}
	tmp := path.Join(path.Dir(rel), ".carryover-upload-"+randomName())
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return FileInfo{}, d.writeError(p, err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = root.Remove(tmp) // before writeError, whose room left then counts the upload's blocks freed
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS) {
			return FileInfo{}, d.writeError(p, err)
		}
		return FileInfo{}, err // the body's error (a client gone, a size limit): the caller's to name
	}
	if err := root.Rename(tmp, rel); err != nil {
		_ = root.Remove(tmp)
		return FileInfo{}, d.writeError(p, err)
	}
	return FileInfo{Path: rel, Size: n, ModifiedAt: time.Now().UTC()}, nil
}

// Delete removes a workspace file.
func (d Dir) Delete(p string) error {
	rel, err := carryover.WorkspacePath(p)
	if err != nil {
		return err
	}
	if rel == "" {
		return carryover.Errorf(carryover.CodeInvalid, "a file path is required")
	}
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return err
	}
	defer root.Close()
	info, err := root.Lstat(rel)
	if err != nil {
		return PathError(p, err)
	}
	if info.IsDir() {
		return carryover.Errorf(carryover.CodeInvalid, "%q is a directory", p).WithDetails("path", p)
	}
	return d.writeError(p, root.Remove(rel))
}

// randomName is a name no upload in flight uses.
func randomName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
