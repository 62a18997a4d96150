package archive

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/chunk"
)

// role is what a chunk is to the chunk that lists it: the structure of a checkpoint is a Merkle DAG
// whose inner chunks are JSON (group descriptors, workspace file descriptors, index chunks) and
// whose leaves are data (pickles, buffers, file contents). A chunk may have several roles (the same
// bytes reached twice); it is checked as each.
type role uint8

const (
	roleData       role = 1 << iota // a leaf: no children
	roleGroup                       // a namespace group's descriptor (persistence's groupDescriptor)
	roleFile                        // a workspace file's descriptor {"size", "chunks"}
	roleBufIndex                    // an index chunk listing buffer entries (a descriptor's "bx")
	roleChunkIndex                  // an index chunk listing [hash, length] (a long buffer's index)
)

const structural = roleGroup | roleFile | roleBufIndex | roleChunkIndex

// child is a chunk a structural chunk lists, and what it is to it.
type child struct {
	hash string
	role role
}

// pair is [hash, length] as descriptors and index chunks list chunks.
type pair struct {
	hash string
	n    int64
}

func (p *pair) UnmarshalJSON(b []byte) error {
	var v [2]json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if err := json.Unmarshal(v[0], &p.hash); err != nil {
		return err
	}
	return json.Unmarshal(v[1], &p.n)
}

// bufEntry is a descriptor's buffer: [readonly, length, [chunks...]] or, indexed,
// [readonly, length, [], [index chunks...]].
type bufEntry struct {
	chunks []pair
	index  []pair
}

func (e *bufEntry) UnmarshalJSON(b []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) != 3 && len(v) != 4 {
		return fmt.Errorf("buffer entry of %d fields", len(v))
	}
	if err := json.Unmarshal(v[2], &e.chunks); err != nil {
		return err
	}
	if len(v) == 4 {
		return json.Unmarshal(v[3], &e.index)
	}
	return nil
}

// children lists what a buffer entry names directly: its index chunks, else its data chunks.
func (e bufEntry) children(out []child) []child {
	for _, p := range e.chunks {
		out = append(out, child{p.hash, roleData})
	}
	for _, p := range e.index {
		out = append(out, child{p.hash, roleChunkIndex})
	}
	return out
}

// childrenOf derives, from the raw bytes of a chunk playing role r, the chunks it lists, each with its
// role: the same edges the agent and the workspace snapshot record when they store the chunk.
func childrenOf(r role, raw []byte) ([]child, error) {
	var out []child
	switch r {
	case roleData:
		return nil, nil
	case roleGroup:
		var d struct {
			P  []pair     `json:"p"`
			B  []bufEntry `json:"b"`
			BX []pair     `json:"bx"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("group descriptor: %w", err)
		}
		for _, p := range d.P {
			out = append(out, child{p.hash, roleData})
		}
		for _, b := range d.B {
			out = b.children(out)
		}
		for _, p := range d.BX {
			out = append(out, child{p.hash, roleBufIndex})
		}
	case roleFile:
		var d struct {
			Size   int64    `json:"size"`
			Chunks []string `json:"chunks"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("file descriptor: %w", err)
		}
		for _, h := range d.Chunks {
			out = append(out, child{h, roleData})
		}
	case roleBufIndex:
		var run []bufEntry
		if err := json.Unmarshal(raw, &run); err != nil {
			return nil, fmt.Errorf("buffer index chunk: %w", err)
		}
		for _, b := range run {
			out = b.children(out)
		}
	case roleChunkIndex:
		var run []pair
		if err := json.Unmarshal(raw, &run); err != nil {
			return nil, fmt.Errorf("chunk index chunk: %w", err)
		}
		for _, p := range run {
			out = append(out, child{p.hash, roleData})
		}
	default:
		return nil, fmt.Errorf("unknown role %d", r)
	}
	for _, c := range out {
		if !chunk.ValidHash(c.hash) {
			return nil, fmt.Errorf("names %q, not a chunk address", c.hash)
		}
	}
	return out, nil
}

// childrenAs derives the children of a chunk holding every role in rs (a bit set).
func childrenAs(rs role, raw []byte) ([]child, error) {
	var out []child
	for r := roleGroup; r <= roleChunkIndex; r <<= 1 {
		if rs&r == 0 {
			continue
		}
		cs, err := childrenOf(r, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// hashSet is the sorted, duplicate-free list of the children's hashes: the edges a store records.
func hashSet(cs []child) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.hash)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// roots are the chunks a manifest names, with their roles, in the order a checkpoint's commit
// lists them (groups, then files).
func roots(m *persistence.Manifest) []child {
	var out []child
	for _, g := range m.Groups {
		if g.Ref != "" {
			out = append(out, child{g.Ref, roleGroup})
		}
	}
	for _, f := range m.Files {
		out = append(out, child{f.Ref, roleFile})
	}
	return out
}

// rootHashes are the roots' hashes in order, each once.
func rootHashes(m *persistence.Manifest) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range roots(m) {
		if !seen[c.hash] {
			seen[c.hash] = true
			out = append(out, c.hash)
		}
	}
	return out
}
