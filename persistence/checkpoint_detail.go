package persistence

import (
	"context"
	"encoding/json"

	"github.com/carryover/carryover"
)

// CheckpointDetail is one checkpoint's content as the UI's checkpoint diff and variable inspector
// read it: each saved variable with its type, restore group and stored size, the skipped ones, and
// the workspace files. Group references are content hashes: two checkpoints hold the same value of a
// variable exactly when its Ref is the same.
type CheckpointDetail struct {
	ID           string               `json:"id"`
	Turn         int                  `json:"turn"`
	CreatedAt    string               `json:"created_at"`
	Variables    []VariableDetail     `json:"variables"`
	Skipped      []carryover.VarSkip  `json:"skipped"`
	Files        []FileDetail         `json:"files"`
	FilesSkipped []carryover.FileSkip `json:"files_skipped"`
}

// VariableDetail is one saved name. Bytes is the serialized size of its group (names sharing
// objects are saved together; each name of a group reports the group's size), 0 for imports.
type VariableDetail struct {
	Name  string `json:"name"`
	Type  string `json:"type,omitempty"`
	Kind  string `json:"kind"` // "imp", "def" or "data"
	Ref   string `json:"ref,omitempty"`
	Bytes int64  `json:"bytes"`
}

// FileDetail is one saved workspace file; Ref changes exactly when its content does.
type FileDetail struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	Ref        string `json:"ref"`
	ModifiedAt string `json:"modified_at"`
}

// Detail reads a checkpoint's manifest and the descriptor chunk of each group (a few hundred bytes
// each) for the sizes. A descriptor that cannot be read leaves that size 0 rather than failing.
func (c *Checkpointer) Detail(ctx context.Context, r carryover.ChunkReader, cp carryover.Checkpoint) (*CheckpointDetail, error) {
	m, err := c.ParseManifest(cp)
	if err != nil {
		return nil, err
	}
	d := &CheckpointDetail{ID: cp.ID, Turn: cp.Turn, CreatedAt: cp.CreatedAt.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"),
		Variables: []VariableDetail{}, Skipped: m.Skipped, Files: []FileDetail{}, FilesSkipped: m.FilesSkipped}
	if d.Skipped == nil {
		d.Skipped = []carryover.VarSkip{}
	}
	if d.FilesSkipped == nil {
		d.FilesSkipped = []carryover.FileSkip{}
	}
	var buf []byte
	for _, g := range m.Groups {
		if g.Kind == GroupState { // interpreter state (@random, @magics, ...) is not a variable
			continue
		}
		var size int64
		if g.Ref != "" {
			if buf, err = r.ReadChunk(ctx, g.Ref, buf[:0]); err == nil {
				size = descriptorBytes(buf)
			}
		}
		for i, n := range g.Names {
			v := VariableDetail{Name: n, Kind: g.Kind, Ref: g.Ref, Bytes: size}
			if i < len(g.Types) {
				v.Type = g.Types[i]
			}
			if g.Kind == "imp" {
				v.Ref = g.Module + ":" + g.Attr
			}
			d.Variables = append(d.Variables, v)
		}
	}
	for _, f := range m.Files {
		d.Files = append(d.Files, FileDetail{Path: f.Path, Size: f.Size, Ref: f.Ref, ModifiedAt: f.ModTime.UTC().Format("2006-01-02T15:04:05Z07:00")})
	}
	return d, nil
}

// descriptorBytes sums the raw lengths of a group descriptor's pickle chunks and buffers.
func descriptorBytes(b []byte) int64 {
	var g groupDescriptor
	if json.Unmarshal(b, &g) != nil {
		return 0
	}
	var n int64
	for _, c := range g.Pickle {
		n += c.Len
	}
	for _, bf := range g.Buffers {
		n += bf.Len
	}
	for _, ix := range g.BufferIndex {
		n += ix.Len
	}
	return n
}
