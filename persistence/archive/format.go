package archive

import (
	"encoding/json"
	"time"
)

// Format identifies a carryover session archive in its index; Version is the newest archive format
// this package reads and writes. It writes version 1 unless the archive carries the session's
// events (version 2 adds that part), so an archive without them stays readable by every reader of
// version 1.
const (
	Format       = "carryover-session-archive"
	Version      = 2
	EventVersion = 2 // the first version that may carry events
)

// Member names, in the order they appear in the tar stream.
const (
	IndexName    = "carryover/index.json"
	ManifestName = "carryover/manifest.json"
	SessionName  = "carryover/session.json"
	EventsName   = "carryover/events.jsonl" // version 2, optional
	chunkDir     = "carryover/chunks/"
	zstdSuffix   = ".zst"
	TrailerName  = "carryover/digest.sha256"
)

// Index is the archive's first member: what it holds, declared before any of it, so a reader can
// check sizes, quotas and the chunk graph before it reads a byte of chunk data.
type Index struct {
	Format    string    `json:"format"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	Producer  string    `json:"producer"`
	Source    Source    `json:"source"`
	// Parts are the manifest and session members (and, in version 2, the events member when it is
	// there): name, size and SHA-256 of their bytes.
	Parts []Part `json:"parts"`
	// Chunks lists every chunk the manifest reaches, each once, parents before children (the order
	// of their members). RawBytes is the sum of their raw lengths.
	Chunks   []ChunkEntry `json:"chunks"`
	RawBytes int64        `json:"raw_bytes"`
}

// Source says where the archive was made: the session, the checkpoint exported, and the path the
// source's kernel saw its workspace as (a working dir under it is relocated on import).
type Source struct {
	SessionID    string    `json:"session_id"`
	CheckpointID string    `json:"checkpoint_id"`
	Turn         int       `json:"turn"`
	CreatedAt    time.Time `json:"checkpoint_created_at"`
	Workspace    string    `json:"workspace,omitempty"`
	// ManifestFormat is the checkpoint format of the manifest (its "v"; docs/operations.md).
	ManifestFormat int `json:"manifest_format"`
}

// Part is a non-chunk member and its digest.
type Part struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ChunkEntry is one chunk: its address (xxh3-128 of its raw bytes, 32 lowercase hex digits), its raw
// length, and the chunks it lists (descriptors and index chunks; sorted, each once).
type ChunkEntry struct {
	Hash     string   `json:"h"`
	RawLen   int64    `json:"n"`
	Children []string `json:"ch,omitempty"`
}

// Limits bound what Read accepts. Zero fields take the defaults below.
type Limits struct {
	MaxArchiveBytes int64 // the whole stream
	MaxChunkBytes   int64 // one chunk, raw (and stored)
	MaxPartBytes    int64 // the index, the manifest, the session settings, each
	MaxChunks       int   // chunks in one archive
	MaxEvents       int   // events in the events member
	// ReadFormat is the newest checkpoint format the importing store reads and writes (0: this
	// binary's newest).
	ReadFormat int
}

// Defaults of Limits.
const (
	DefaultMaxArchiveBytes = 64 << 30
	DefaultMaxChunkBytes   = 64 << 20
	DefaultMaxPartBytes    = 64 << 20
	DefaultMaxChunks       = 1 << 20
	DefaultMaxEvents       = 1 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if l.MaxChunkBytes <= 0 {
		l.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if l.MaxPartBytes <= 0 {
		l.MaxPartBytes = DefaultMaxPartBytes
	}
	if l.MaxChunks <= 0 {
		l.MaxChunks = DefaultMaxChunks
	}
	if l.MaxEvents <= 0 {
		l.MaxEvents = DefaultMaxEvents
	}
	return l
}

// Settings is the session.json member: the session's settings as the service exports them (opaque
// to this package; the service validates them on import as it validates a create request).
type Settings = json.RawMessage

// ArchivedEvent is one line of the events member: an event of the source session's log as
// GET /api/sessions/{id}/events gives it.
type ArchivedEvent struct {
	SequenceNumber int64           `json:"sequence_number"`
	EventType      string          `json:"event_type"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      time.Time       `json:"created_at"`
}
