package persistence

import (
	"strings"
	"time"

	"github.com/carryover/carryover"
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
	// Sync makes a snapshot that saw a change (a file read, created, renamed or deleted) syncfs the
	// workspace's filesystem before it returns, so the files an answered turn left are on disk when
	// its checkpoint commits: after a power cut the workspace, which a wake trusts as the live copy,
	// is not older than the checkpoint (internal/chaos TestPowerCutTurns).
	Sync bool
}

// FilesResult is what SnapshotFiles found and wrote.
type FilesResult struct {
	Files        []FileEntry          // every saved file of the workspace now (changed and unchanged)
	Skipped      []carryover.FileSkip // hidden, over limits, symlinks, special files, unreadable
	Saved        int                  // files whose content was (re)written this time
	BytesWritten int64                // stored bytes newly written
	Roots        []string             // Ref of every entry in Files (roots of the checkpoint to commit)
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

// PackagesDir is the workspace dir that holds a session's installed Python packages (the sandbox
// points pip's --prefix there): hidden from listings by its name, yet saved like any other files,
// so packages persist, fork and deduplicate (content-addressed chunks) with the workspace.
const PackagesDir = ".packages"

func isHidden(name string) bool { return strings.HasPrefix(name, ".") }

// unreadableError marks a file that could not be read: it is skipped and reported, while store errors
// abort the snapshot.
type unreadableError struct{ err error }

func (e *unreadableError) Error() string { return e.err.Error() }
