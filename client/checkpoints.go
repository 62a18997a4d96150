package client

import (
	"context"
	"net/http"
	"time"
)

// CheckpointResult says what a turn's checkpoint saved, left alone and could not save.
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
}

// CheckpointTimings splits a checkpoint's time.
type CheckpointTimings struct {
	DetectMS    float64 `json:"detect_ms"`
	SerializeMS float64 `json:"serialize_ms"`
	WriteMS     float64 `json:"write_ms"`
	FilesMS     float64 `json:"files_ms"`
	// DirtyMode says how changes in large buffers were found ("uffd", "hash" or "mixed");
	// DirtyFallback says why tracking was not used where it was not.
	DirtyMode     string `json:"dirty_mode,omitempty"`
	DirtyFallback string `json:"dirty_fallback,omitempty"`
	// SlicedBytes is the pickled size of large lists/dicts of records saved in slices, and
	// SlicedRepickledBytes the part this checkpoint pickled again.
	SlicedBytes          int64 `json:"sliced_bytes,omitempty"`
	SlicedRepickledBytes int64 `json:"sliced_repickled_bytes,omitempty"`
	// Unsliced names the large containers pickled whole (not JSON-like, nested too deep, an
	// object in them twice), with why.
	Unsliced []VarSkip `json:"unsliced,omitempty"`
}

// VarSkip is a variable not saved (or not restored), and why.
type VarSkip struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// FileSkip is a workspace file not saved, and why.
type FileSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// CheckpointInfo is an item of the session's checkpoint list.
type CheckpointInfo struct {
	ID        string    `json:"id"`
	Turn      int       `json:"turn"`
	CreatedAt time.Time `json:"created_at"`
	Variables []string  `json:"variables"`
	Files     int       `json:"files"`
	Bytes     int64     `json:"bytes"`
}

// RestoreResult says what a restore put back and what it could not.
type RestoreResult struct {
	CheckpointID string    `json:"checkpoint_id"`
	Turn         int       `json:"turn"`
	Restored     []string  `json:"restored"`
	Failed       []VarSkip `json:"failed"`
	Skipped      []VarSkip `json:"skipped"`
	// Recomputed: skipped variables rebuilt by replaying the turns that made them; NotReplayed:
	// those replay could not rebuild, with why.
	Recomputed  []Recomputed   `json:"recomputed"`
	NotReplayed []VarSkip      `json:"not_replayed"`
	Files       int            `json:"files"`
	Cwd         string         `json:"cwd"`
	DurationMS  float64        `json:"duration_ms"`
	Timings     RestoreTimings `json:"timings"`
	Groups      []GroupTiming  `json:"groups,omitempty"`
}

// Recomputed is a variable a restore rebuilt by replay: the turn that bound it, the turns replayed,
// and what of it matched the fingerprint its checkpoint saved ("" when it holds none).
type Recomputed struct {
	Name     string  `json:"name"`
	Turn     int     `json:"turn"`
	Turns    []int   `json:"turns"`
	MS       float64 `json:"ms"`
	Verified string  `json:"verified,omitempty"`
}

// RestoreReport is a restore as the next run's answer tells it (RunResult.Restore).
type RestoreReport struct {
	CheckpointID string       `json:"checkpoint_id"`
	Turn         int          `json:"turn"`
	Recomputed   []Recomputed `json:"recomputed"`
	NotReplayed  []VarSkip    `json:"not_replayed"`
	Skipped      []VarSkip    `json:"skipped"`
	Failed       []VarSkip    `json:"failed"`
	// FilesAhead names workspace files a wake kept that differ from the checkpoint restored
	// (changed, added or deleted since it, e.g. by a turn never answered).
	FilesAhead []string `json:"files_ahead,omitempty"`
}

// RestoreTimings splits a restore's time.
type RestoreTimings struct {
	ReadMS    float64 `json:"read_ms"`
	LoadMS    float64 `json:"load_ms"`
	WaitMS    float64 `json:"wait_ms,omitempty"` // the part of the load that waited for chunks (into a new kernel, load and read overlap)
	FilesMS   float64 `json:"files_ms"`
	LazyBytes int64   `json:"lazy_bytes,omitempty"` // large buffers filled in the background after the restore
	LazyOff   string  `json:"lazy_off,omitempty"`   // why large buffers were read eagerly instead
	// SharedBytes: large buffers mapped copy-on-write from the node's one copy (a fork's children).
	SharedBytes int64  `json:"shared_bytes,omitempty"`
	SharedOff   string `json:"shared_off,omitempty"` // why they were not
}

// GroupTiming is the load time of one group of variables in the kernel.
type GroupTiming struct {
	Names []string `json:"n"`
	MS    float64  `json:"ms"`
}

// The answers of the checkpoint endpoints (named so that the spec test, client/speccheck, checks them).
type (
	checkpointAnswer struct {
		Checkpoint CheckpointResult `json:"checkpoint"`
	}
	checkpointsAnswer struct {
		Checkpoints []CheckpointInfo `json:"checkpoints"`
	}
	restoreAnswer struct {
		Session Session       `json:"session"`
		Restore RestoreResult `json:"restore"`
	}
)

// Checkpoint takes a checkpoint now (the session needs a live kernel: else 409 conflict).
func (c *Client) Checkpoint(ctx context.Context, id string) (*CheckpointResult, error) {
	var out checkpointAnswer
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "checkpoint"), nil, &out); err != nil {
		return nil, err
	}
	return &out.Checkpoint, nil
}

// Checkpoints lists the session's checkpoints, newest first.
func (c *Client) Checkpoints(ctx context.Context, id string) ([]CheckpointInfo, error) {
	var out checkpointsAnswer
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "checkpoints"), nil, &out); err != nil {
		return nil, err
	}
	return out.Checkpoints, nil
}

// RestoreCheckpoint puts the session back to checkpoint cid (namespace and files) in a fresh
// kernel, and returns the session and what was restored.
func (c *Client) RestoreCheckpoint(ctx context.Context, id, cid string) (*Session, *RestoreResult, error) {
	var out restoreAnswer
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "checkpoints", cid, "restore"), nil, &out); err != nil {
		return nil, nil, err
	}
	return &out.Session, &out.Restore, nil
}
