package carryover

import (
	"encoding/json"
	"time"
)

// Checkpoint is the saved state of a session after a turn, as stored. It exists only once its
// commit (one transaction, after all its chunks were put) succeeded, so a crash at any moment leaves
// the whole checkpoint or none of it, and the previous one intact.
type Checkpoint struct {
	ID        string          `db:"id" json:"id"`
	SessionID string          `db:"session_id" json:"-"`
	Turn      int             `db:"turn" json:"turn"`
	ParentID  string          `db:"parent_id" json:"parent_id,omitempty"`
	Manifest  json.RawMessage `db:"manifest" json:"-"`  // small JSON owned by the checkpoint engine
	Bytes     int64           `db:"bytes" json:"bytes"` // bytes newly written for this checkpoint
	CreatedAt time.Time       `db:"created_at" json:"created_at"`
	Roots     []string        `db:"-" json:"-"` // top-level chunk hashes, in the order committed
}

// ChunkInput is a chunk to store. Chunks form a Merkle DAG: a descriptor chunk lists other chunks
// in Children, recorded once, when the chunk is first stored, as the edges GC follows from
// checkpoint roots.
type ChunkInput struct {
	Hash     string // xxh3-128 of the RAW bytes, hex
	Codec    string // "raw" | "zstd": how Data is stored
	RawLen   int64
	Data     []byte // stored bytes (compressed if Codec == "zstd"), at most a few MiB
	Children []string
}

// CheckpointResult is the "checkpoint" object of a run's answer: what one checkpoint saved,
// skipped and cost.
type CheckpointResult struct {
	ID           string            `json:"id"`
	Turn         int               `json:"turn"`
	Saved        []string          `json:"saved"`
	Unchanged    int               `json:"unchanged"`
	Skipped      []VarSkip         `json:"skipped"`
	FilesSaved   int               `json:"files_saved"`
	FilesSkipped []FileSkip        `json:"files_skipped"`
	BytesWritten int64             `json:"bytes_written"`
	DurationMS   float64           `json:"duration_ms"`
	Timings      CheckpointTimings `json:"timings"`
	CreatedAt    time.Time         `json:"created_at"`
	// Quiet: when the snapshot was taken, nothing of the session could run in the kernel without a
	// message from the server (no thread, task or timer of its own). Not part of the API.
	Quiet bool `json:"-"`
	// PruneError: the checkpoint committed, but removing the checkpoints beyond the retention after it
	// failed (they stay until a later commit prunes them). Not part of the API; the caller logs it.
	PruneError error `json:"-"`
}

// CheckpointTimings splits a checkpoint's time: detect (what changed), serialize (pickle + hash),
// write (spool files, store puts, commit); files is the workspace snapshot (stat, read, put).
type CheckpointTimings struct {
	DetectMS    float64 `json:"detect_ms"`
	SerializeMS float64 `json:"serialize_ms"`
	WriteMS     float64 `json:"write_ms"`
	FilesMS     float64 `json:"files_ms"`
	// DirtyMode says how changes in large buffers were found: "uffd" (dirty-page tracking), "hash"
	// (every chunk hashed; DirtyFallback says why), "mixed", or "" (no buffer large enough to track).
	DirtyMode     string `json:"dirty_mode,omitempty"`
	DirtyFallback string `json:"dirty_fallback,omitempty"`
	// SlicedBytes is the pickled size of the large lists and dicts of records saved in slices;
	// SlicedRepickledBytes the part of it this checkpoint pickled again (the changed slices).
	SlicedBytes          int64 `json:"sliced_bytes,omitempty"`
	SlicedRepickledBytes int64 `json:"sliced_repickled_bytes,omitempty"`
	// Unsliced names the large containers this checkpoint pickled whole, with why (an item that is
	// not JSON-like, nested too deep, an object in it twice): slicing them was not possible.
	Unsliced []VarSkip `json:"unsliced,omitempty"`
}

// CheckpointSummary is an item of a session's checkpoint list.
type CheckpointSummary struct {
	ID        string   `json:"id"`
	Turn      int      `json:"turn"`
	CreatedAt string   `json:"created_at"`
	Variables []string `json:"variables"`
	Files     int      `json:"files"`
	Bytes     int64    `json:"bytes"`
}

// VarSkip is a variable that could not be saved or restored, and why.
type VarSkip struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// FileSkip is a workspace file (or hidden directory) that was not saved, and why.
type FileSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// RestoreResult says what a restore put back and what it could not.
type RestoreResult struct {
	CheckpointID string    `json:"checkpoint_id"`
	Turn         int       `json:"turn"`
	Restored     []string  `json:"restored"`
	Failed       []VarSkip `json:"failed"`
	Skipped      []VarSkip `json:"skipped"` // not saved in the first place (reported at checkpoint time)
	// Recomputed: skipped variables rebuilt by replaying the turns that made them; NotReplayed: the
	// skipped variables replay could not rebuild, each with why ("not replayed: turn 7 writes files").
	Recomputed  []Recomputed `json:"recomputed"`
	NotReplayed []VarSkip    `json:"not_replayed"`
	Files       int          `json:"files"`
	// FilesAhead: a wake keeps the workspace on disk as the live copy (it restores no files), so
	// files that differ from the checkpoint (written, added or deleted since it, e.g. by a turn that
	// was never answered because the server died) are named here rather than silently kept.
	FilesAhead []string       `json:"files_ahead,omitempty"`
	Cwd        string         `json:"cwd"`
	DurationMS float64        `json:"duration_ms"`
	Timings    RestoreTimings `json:"timings"`
	Groups     []GroupTiming  `json:"groups,omitempty"`
}

// Recomputed is a variable a restore rebuilt by replaying turns: the turn that bound it, every turn
// replayed with it, the replay's time, and what of the rebuilt value was checked against the
// fingerprint the checkpoint saved of it ("type, shape, dtype, requires_grad, grad_fn, data"; empty
// when the checkpoint has none: it was written before fingerprints were saved).
type Recomputed struct {
	Name     string  `json:"name"`
	Turn     int     `json:"turn"`
	Turns    []int   `json:"turns"`
	MS       float64 `json:"ms"`
	Verified string  `json:"verified,omitempty"`
}

// RestoreReport is what the run after a restore (a wake, a kernel's death, a checkpoint restore)
// says of it: the checkpoint restored, what it skipped, what replay rebuilt and what it could not,
// what failed to load. Told once, in the next run's answer.
type RestoreReport struct {
	CheckpointID string       `json:"checkpoint_id"`
	Turn         int          `json:"turn"`
	Recomputed   []Recomputed `json:"recomputed"`
	NotReplayed  []VarSkip    `json:"not_replayed"`
	Skipped      []VarSkip    `json:"skipped"`
	Failed       []VarSkip    `json:"failed"`
	FilesAhead   []string     `json:"files_ahead,omitempty"`
}

// Report is the RestoreReport of r.
func (r *RestoreResult) Report() *RestoreReport {
	return &RestoreReport{CheckpointID: r.CheckpointID, Turn: r.Turn, Recomputed: r.Recomputed, NotReplayed: r.NotReplayed,
		Skipped: r.Skipped, Failed: r.Failed, FilesAhead: r.FilesAhead}
}

// RestoreTimings splits a restore: read (chunks from the store into spool files), load (unpickling
// in the kernel), files (workspace files). Into a new kernel (a wake, a fork's first run) the load
// runs while the files are read, so read and load overlap; WaitMS is the part of the load that
// waited for files. LazyBytes are the bytes of large buffers mapped at once
// and filled in the background after the restore returned (not in read_ms); LazyOff says why large
// buffers that could have been were read eagerly instead. SharedBytes are the bytes of large buffers
// mapped copy-on-write from a node-wide copy other kernels may map too (persistence.shared_buffers);
// SharedOff says why buffers that could have been were not.
type RestoreTimings struct {
	ReadMS      float64 `json:"read_ms"`
	LoadMS      float64 `json:"load_ms"`
	WaitMS      float64 `json:"wait_ms,omitempty"`
	FilesMS     float64 `json:"files_ms"`
	LazyBytes   int64   `json:"lazy_bytes,omitempty"`
	LazyOff     string  `json:"lazy_off,omitempty"`
	SharedBytes int64   `json:"shared_bytes,omitempty"`
	SharedOff   string  `json:"shared_off,omitempty"`
}

// GroupTiming is the load time of one variable group in the kernel.
type GroupTiming struct {
	Names []string `json:"n"`
	MS    float64  `json:"ms"`
}
