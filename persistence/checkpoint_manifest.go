package persistence

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/format"
)

// Manifest is a checkpoint's small JSON document. A namespace group is referenced by ONE hash (its
// descriptor chunk, which lists the group's pickle and buffer chunks as children), so an unchanged
// 1 GiB array costs one 32-character reference per checkpoint, not a list of its chunks.
type Manifest struct {
	V            int                  `json:"v"`
	Groups       []ManifestGroup      `json:"groups"`
	Skipped      []carryover.VarSkip  `json:"skipped,omitempty"`
	Files        []FileEntry          `json:"files,omitempty"`
	FilesSkipped []carryover.FileSkip `json:"files_skipped,omitempty"`
	Cwd          string               `json:"cwd,omitempty"`
	Env          *EnvDiff             `json:"env,omitempty"`
	// Forked marks the copy a fork commits (CopyCheckpoint): its restores share large buffers with
	// the other kernels restoring the same bytes (shared_bufs.go), the source's other children.
	Forked bool `json:"forked,omitempty"`
}

// ManifestGroup is one restore unit, in restore order: "imp" (modules and names imported from modules,
// re-imported by Module/Attr, no chunks), "def" (classes and functions defined in the session, by value),
// "data" (everything else), "state" (interpreter state that is no variable, named "@...": the global
// random generators, matplotlib's rcParams, session magics). Names sharing objects are one group so
// aliasing survives.
type ManifestGroup struct {
	Kind   string   `json:"k"`
	Names  []string `json:"n"`
	Types  []string `json:"t,omitempty"`
	Ref    string   `json:"r,omitempty"`
	Module string   `json:"m,omitempty"`
	Attr   string   `json:"a,omitempty"`
	// Owners, on a "data" group whose every name was bound to an object a module exposes
	// (`from scipy.stats import norm`): name -> "module:attribute". The restore binds that attribute
	// instead of the saved copy when the two pickle alike (the agent's owners.py).
	Owners map[string]string `json:"o,omitempty"`
}

// GroupState is the kind of a group holding interpreter state, not variables (see ManifestGroup).
const GroupState = "state"

// groupDescriptor is the content of a group's descriptor chunk, written by the agent.
type groupDescriptor struct {
	V       int          `json:"v"`
	Kind    string       `json:"k"`
	Names   []string     `json:"n"`
	Format  string       `json:"f"`
	Pickle  []descChunk  `json:"p"`
	Buffers []descBuffer `json:"b"`
	// BufferIndex, for a group of many buffers (a container in slices), lists index chunks of its
	// buffers instead of Buffers: [hash, bytes its buffers hold], each chunk the JSON list of them.
	BufferIndex []descChunk `json:"bx,omitempty"`
	Deps        []string    `json:"d"`
}

// descChunk is [hash, raw length].
type descChunk struct {
	Hash string
	Len  int64
}

func (c *descChunk) UnmarshalJSON(b []byte) error {
	var v [2]json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if err := json.Unmarshal(v[0], &c.Hash); err != nil {
		return err
	}
	return json.Unmarshal(v[1], &c.Len)
}

func (c descChunk) MarshalJSON() ([]byte, error) { return json.Marshal([2]any{c.Hash, c.Len}) }

// descBuffer is [readonly, total length, [chunks...]]: one out-of-band buffer; or, for a buffer of
// many chunks, [readonly, total length, [], [index chunks...]], each index chunk's content being the
// JSON list of INDEX_FANOUT of its chunks (see the agent's spool.py and expandDescriptor).
type descBuffer struct {
	ReadOnly int
	Len      int64
	Chunks   []descChunk
	Index    []descChunk // [hash, bytes listed] of each index chunk; nil when Chunks are inline
}

func (d *descBuffer) UnmarshalJSON(b []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) != 3 && len(v) != 4 {
		return fmt.Errorf("descriptor buffer of %d fields", len(v))
	}
	if err := json.Unmarshal(v[0], &d.ReadOnly); err != nil {
		return err
	}
	if err := json.Unmarshal(v[1], &d.Len); err != nil {
		return err
	}
	if err := json.Unmarshal(v[2], &d.Chunks); err != nil {
		return err
	}
	if len(v) == 4 {
		return json.Unmarshal(v[3], &d.Index)
	}
	return nil
}

func (d descBuffer) MarshalJSON() ([]byte, error) {
	chunks := d.Chunks
	if chunks == nil {
		chunks = []descChunk{}
	}
	if d.Index != nil {
		return json.Marshal([4]any{d.ReadOnly, d.Len, chunks, d.Index})
	}
	return json.Marshal([3]any{d.ReadOnly, d.Len, chunks})
}

// ParseManifest decodes a checkpoint's manifest, refusing (by name) a format newer than this binary
// reads. A Checkpointer's own ParseManifest reads up to what its store's node reads.
func ParseManifest(cp carryover.Checkpoint) (*Manifest, error) {
	return parseManifest(cp, format.Newest)
}

// ParseManifest decodes a checkpoint's manifest, refusing a format newer than this node reads
// (Checkpointer.ReadFormat).
func (c *Checkpointer) ParseManifest(cp carryover.Checkpoint) (*Manifest, error) {
	return parseManifest(cp, c.ReadFormat())
}

func parseManifest(cp carryover.Checkpoint, newest int) (*Manifest, error) {
	var m Manifest
	if len(cp.Manifest) == 0 {
		return &m, nil
	}
	if err := json.Unmarshal(cp.Manifest, &m); err != nil {
		return nil, fmt.Errorf("checkpoint %s manifest: %w", cp.ID, err)
	}
	if err := format.Check("checkpoint "+cp.ID, m.V, newest); err != nil {
		return nil, err
	}
	return &m, nil
}

// FormatStore is a CheckpointStore shared by carryover nodes that may be of different builds (a
// cluster's PostgreSQL store): Format is the checkpoint format the cluster writes now (the newest
// every live node reads), MaxFormat the newest this node reads. The Checkpointer stamps Format on
// every manifest it writes and refuses manifests newer than MaxFormat. A store without it (SQLite,
// one node) writes and reads this binary's format.Newest.
type FormatStore interface {
	Format() int
	MaxFormat() int
}

// WriteFormat is the checkpoint format the Checkpointer stamps on the manifest it writes now.
func (c *Checkpointer) WriteFormat() int {
	if f, ok := c.Store.(FormatStore); ok {
		return f.Format()
	}
	return format.Newest
}

// ReadFormat is the newest checkpoint format the Checkpointer reads.
func (c *Checkpointer) ReadFormat() int {
	if f, ok := c.Store.(FormatStore); ok {
		return f.MaxFormat()
	}
	return format.Newest
}

// Variables lists the names a checkpoint holds, sorted (the API's checkpoint list shows them).
func (c *Checkpointer) Variables(cp carryover.Checkpoint) []string {
	m, err := c.ParseManifest(cp)
	if err != nil {
		return []string{}
	}
	return m.Variables()
}

// Variables lists the saved names, sorted.
func (m *Manifest) Variables() []string {
	out := []string{}
	for _, g := range m.Groups {
		if g.Kind != GroupState {
			out = append(out, g.Names...)
		}
	}
	sort.Strings(out)
	return out
}

// Summarize returns a checkpoint as the API's checkpoint list shows it.
func (c *Checkpointer) Summarize(cp carryover.Checkpoint) carryover.CheckpointSummary {
	s := carryover.CheckpointSummary{ID: cp.ID, Turn: cp.Turn, CreatedAt: cp.CreatedAt.UTC().Format(time.RFC3339Nano),
		Variables: []string{}, Bytes: cp.Bytes}
	if m, err := c.ParseManifest(cp); err == nil {
		s.Variables = m.Variables()
		s.Files = len(m.Files)
	}
	return s
}
