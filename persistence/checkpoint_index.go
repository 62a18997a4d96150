package persistence

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/carryover/carryover"
)

// expandDescriptor parses a group descriptor and reads the index chunks of its long buffers, so every
// buffer lists its chunks inline. It returns the parsed descriptor and its JSON with the lists
// inline (the form the agent restores from; its other fields are kept as they were). A descriptor
// with no index chunks comes back unchanged.
func expandDescriptor(ctx context.Context, r carryover.ChunkReader, raw []byte) (*groupDescriptor, []byte, error) {
	var d groupDescriptor
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, nil, err
	}
	indexed := false
	var buf []byte
	for i := range d.Buffers {
		b := &d.Buffers[i]
		if b.Index == nil {
			continue
		}
		indexed = true
		var total int64
		for _, ix := range b.Index {
			var err error
			if buf, err = r.ReadChunk(ctx, ix.Hash, buf[:0]); err != nil {
				return nil, nil, fmt.Errorf("index chunk %s: %w", ix.Hash, err)
			}
			var run []descChunk
			if err := json.Unmarshal(buf, &run); err != nil {
				return nil, nil, fmt.Errorf("index chunk %s: %w", ix.Hash, err)
			}
			var n int64
			for _, c := range run {
				n += c.Len
			}
			if n != ix.Len {
				return nil, nil, fmt.Errorf("index chunk %s lists %d bytes, the descriptor says %d", ix.Hash, n, ix.Len)
			}
			b.Chunks = append(b.Chunks, run...)
			total += n
		}
		if total != b.Len {
			return nil, nil, fmt.Errorf("buffer %d: index chunks list %d bytes, the descriptor says %d", i, total, b.Len)
		}
		b.Index = nil
	}
	if !indexed {
		return &d, raw, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, nil, err
	}
	bj, err := json.Marshal(d.Buffers)
	if err != nil {
		return nil, nil, err
	}
	fields["b"] = bj
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, nil, err
	}
	return &d, out, nil
}

// GroupChunks lists every chunk a group's descriptor names (pickle and buffer chunks, index chunks
// expanded), in order: what a restore of the group reads.
func GroupChunks(ctx context.Context, r carryover.ChunkReader, ref string) ([]string, error) {
	raw, err := r.ReadChunk(ctx, ref, nil)
	if err != nil {
		return nil, err
	}
	d, _, err := expandDescriptor(ctx, r, raw)
	if err != nil {
		return nil, fmt.Errorf("descriptor %s: %w", ref, err)
	}
	var out []string
	for _, c := range d.Pickle {
		out = append(out, c.Hash)
	}
	for _, b := range d.Buffers {
		for _, c := range b.Chunks {
			out = append(out, c.Hash)
		}
	}
	return out, nil
}
