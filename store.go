package carryover

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// The interfaces below are what the session service and the checkpoint engine need from storage.
// persistence/sqlite implements them all; persistence/storetest is the one contract suite every
// implementation must pass. Errors: "not found" and "already exists" are *Error values of code
// CodeNotFound and CodeConflict (test them with errors.Is(err, ErrNotFound) / ErrConflict); anything
// else is the backend's own error, wrapped with context, which the API answers as internal.

// SessionRecord is a session as stored: the service owns the JSON document (Doc); a store keeps it
// whole beside the few columns it needs to find sessions.
type SessionRecord struct {
	ID        string          `db:"id"`
	ClientID  string          `db:"client_id"` // "" when none
	State     string          `db:"state"`
	Doc       json.RawMessage `db:"doc"` // the Session as the service serialises it
	CreatedAt time.Time       `db:"created_at"`
	UpdatedAt time.Time       `db:"updated_at"`
}

// SessionStore keeps session documents.
type SessionStore interface {
	// CreateSession inserts r; CodeConflict if the id is taken. Zero times mean now.
	CreateSession(ctx context.Context, r SessionRecord) error
	// UpdateSession replaces the record of r.ID; CodeNotFound if there is none.
	UpdateSession(ctx context.Context, r SessionRecord) error
	// GetSession returns one record; CodeNotFound if there is none.
	GetSession(ctx context.Context, id string) (SessionRecord, error)
	// ListSessions returns every record, oldest first.
	ListSessions(ctx context.Context) ([]SessionRecord, error)
	// DeleteSession removes the session and everything recorded for it (events, executions, tools,
	// checkpoints; chunks become garbage for GC); CodeNotFound if there is none.
	DeleteSession(ctx context.Context, id string) error
}

// EventLog is each session's append-only event log.
type EventLog interface {
	// AppendEvent appends an event and returns it with its sequence number: 1, 2, 3... per session
	// without gaps, also under concurrent appends. payload is marshalled to JSON unless it already is
	// JSON (json.RawMessage or []byte). CodeNotFound if the session does not exist.
	AppendEvent(ctx context.Context, sessionID, eventType string, payload any) (Event, error)
	// ListEvents returns the events q selects (EventQuery), oldest first, or newest first with
	// q.Newest. An unknown session has no events.
	ListEvents(ctx context.Context, sessionID string, q EventQuery) ([]Event, error)
}

// ExecutionLog is each session's history of runs and shell commands.
type ExecutionLog interface {
	// InsertExecution records e (its ID is ignored; a zero StartedAt means now) and returns the new
	// id; CodeNotFound if the session does not exist.
	InsertExecution(ctx context.Context, e Execution) (int64, error)
	// ListExecutions returns the newest limit executions, oldest first.
	ListExecutions(ctx context.Context, sessionID string, limit int) ([]Execution, error)
}

// ToolStore keeps each session's tool registry.
type ToolStore interface {
	// PutTool inserts t or replaces the tool of the same name (keeping its created_at, so listings
	// stay in registration order); CodeNotFound if the session does not exist.
	PutTool(ctx context.Context, t Tool) error
	// ListTools returns the session's tools in registration order.
	ListTools(ctx context.Context, sessionID string) ([]Tool, error)
}

// ChunkReader reads content-addressed chunks.
type ChunkReader interface {
	// ReadChunk appends the raw (decoded) bytes of chunk hash to buf and returns it; CodeNotFound if
	// the chunk is not stored. The bytes are verified against the hash.
	ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error)
	// ReadChunkTo writes the raw bytes of chunk hash to w; CodeNotFound if it is not stored.
	ReadChunkTo(ctx context.Context, hash string, w io.Writer) (int64, error)
	// MissingChunks returns those of hashes that are not stored (each once).
	MissingChunks(ctx context.Context, hashes []string) ([]string, error)
}

// ChunkCataloger is what a store whose every chunk read looks its chunk up in a catalog a round
// trip away (PostgreSQL) offers besides: ReaderFor looks many up at once, for a reader that reads
// them (a restore's assembly). A store without it is read chunk by chunk.
type ChunkCataloger interface {
	ReaderFor(ctx context.Context, hashes []string) (ChunkReader, error)
}

// ChunkWriter is what a checkpoint in progress writes through.
type ChunkWriter interface {
	ChunkReader
	// PutChunks stores the chunks that are not stored yet, all or none, and returns the stored bytes
	// newly written. A raw chunk whose bytes do not match its hash is refused, and so is a batch
	// naming a child that is neither stored nor in the batch (that error wraps ErrMissingChunk).
	PutChunks(ctx context.Context, chunks []ChunkInput) (int64, error)
}

// CheckpointWriter is one checkpoint being written: chunks put through it are safe from GC until
// Commit or Close, so a collection racing the checkpoint never takes them.
type CheckpointWriter interface {
	ChunkWriter
	// Commit makes cp (its chunks put before, through this writer or earlier) the session's newest
	// checkpoint in one transaction. CodeNotFound if the session does not exist; an error wrapping
	// ErrMissingChunk if a root chunk is not stored (a GC took it: write it again); CodeConflict if
	// cp.ID exists.
	Commit(ctx context.Context, cp Checkpoint) error
	// Close ends the writer; chunks of an uncommitted checkpoint become garbage. Always call it.
	Close()
}

// CheckpointStore keeps checkpoints and their chunks.
type CheckpointStore interface {
	ChunkReader
	// BeginCheckpoint starts writing a checkpoint (many may be in progress at once).
	BeginCheckpoint(ctx context.Context) (CheckpointWriter, error)
	// GetCheckpoint returns one checkpoint of the session; CodeNotFound if there is none.
	GetCheckpoint(ctx context.Context, sessionID, id string) (Checkpoint, error)
	// LatestCheckpoint returns the session's newest checkpoint; CodeNotFound if it has none.
	LatestCheckpoint(ctx context.Context, sessionID string) (Checkpoint, error)
	// ListCheckpoints returns the session's checkpoints, newest first.
	ListCheckpoints(ctx context.Context, sessionID string) ([]Checkpoint, error)
	// Prune deletes all but the newest keep checkpoints of the session and returns how many went. The
	// newest is never pruned (keep < 1 counts as 1): a session keeps something to restore.
	Prune(ctx context.Context, sessionID string, keep int) (int, error)
	// GC deletes chunks no checkpoint reaches and returns how many and their stored bytes. It never
	// takes chunks of a checkpoint still being written.
	GC(ctx context.Context) (chunks int, bytes int64, err error)
}

// Store is everything a carryover server keeps: one backend implements all of it.
type Store interface {
	SessionStore
	EventLog
	ExecutionLog
	ToolStore
	CheckpointStore
	SkillStore
	KeyStore
	IdempotencyStore
	EphemeralKeyStore
	Close() error
}
