package persistence

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/carryover/carryover"
)

// expandDescriptor parses a group descriptor and reads its index chunks (of its buffer list, and of
// each long buffer's chunk list), so every buffer and its chunks are listed inline. It returns the
// parsed descriptor and its JSON in that flat form (what the agent restores from; other fields kept
// as they were). A descriptor without index chunks comes back unchanged.
func expandDescriptor(ctx context.Context, r carryover.ChunkReader, raw []byte) (*groupDescriptor, []byte, error) {
	var d groupDescriptor
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, nil, err
	}
	indexed := len(d.BufferIndex) > 0
	buf, err := expandBufferList(ctx, r, &d, nil)
	if err != nil {
		return nil, nil, err
	}
	for i := range d.Buffers {
		if d.Buffers[i].Index != nil {
			indexed = true
			if buf, err = expandChunkList(ctx, r, &d.Buffers[i], buf); err != nil {
				return nil, nil, fmt.Errorf("buffer %d: %w", i, err)
			}
		}
	}
	if !indexed {
		return &d, raw, nil
	}
	flat, err := flatJSON(raw, d.Buffers)
	if err != nil {
		return nil, nil, err
	}
	return &d, flat, nil
}

// expandBufferList appends the buffers listed by d's buffer-list index chunks to d.Buffers.
func expandBufferList(ctx context.Context, r carryover.ChunkReader, d *groupDescriptor, buf []byte) ([]byte, error) {
	for _, ix := range d.BufferIndex {
		run, b, err := readRun(ctx, r, ix, buf, func(b descBuffer) int64 { return b.Len })
		if buf = b; err != nil {
			return buf, err
		}
		d.Buffers = append(d.Buffers, run...)
	}
	d.BufferIndex = nil
	return buf, nil
}

// expandChunkList lists b's chunks inline from its index chunks, checking their byte counts.
func expandChunkList(ctx context.Context, r carryover.ChunkReader, b *descBuffer, buf []byte) ([]byte, error) {
	var total int64
	for _, ix := range b.Index {
		run, bb, err := readRun(ctx, r, ix, buf, func(c descChunk) int64 { return c.Len })
		if buf = bb; err != nil {
			return buf, err
		}
		b.Chunks = append(b.Chunks, run...)
		total += ix.Len
	}
	if total != b.Len {
		return buf, fmt.Errorf("index chunks list %d bytes, the descriptor says %d", total, b.Len)
	}
	b.Index = nil
	return buf, nil
}

// readRun reads index chunk ix (into buf, returned for reuse) as a list of items and checks that
// they hold the ix.Len bytes the descriptor says.
func readRun[T any](ctx context.Context, r carryover.ChunkReader, ix descChunk, buf []byte, size func(T) int64) ([]T, []byte, error) {
	var run []T
	buf, err := readIndex(ctx, r, ix.Hash, buf, &run)
	if err != nil {
		return nil, buf, err
	}
	var n int64
	for _, it := range run {
		n += size(it)
	}
	if n != ix.Len {
		return nil, buf, fmt.Errorf("index chunk %s lists %d bytes, the descriptor says %d", ix.Hash, n, ix.Len)
	}
	return run, buf, nil
}

// readIndex reads index chunk h (into buf, returned for reuse) and decodes its JSON into v.
func readIndex(ctx context.Context, r carryover.ChunkReader, h string, buf []byte, v any) ([]byte, error) {
	buf, err := r.ReadChunk(ctx, h, buf[:0])
	if err != nil {
		return buf, fmt.Errorf("index chunk %s: %w", h, err)
	}
	if err := json.Unmarshal(buf, v); err != nil {
		return buf, fmt.Errorf("index chunk %s: %w", h, err)
	}
	return buf, nil
}

// flatJSON is the descriptor raw with its buffer list replaced by buffers, and no "bx".
func flatJSON(raw []byte, buffers []descBuffer) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	if buffers == nil {
		buffers = []descBuffer{}
	}
	bj, err := json.Marshal(buffers)
	if err != nil {
		return nil, err
	}
	fields["b"] = bj
	delete(fields, "bx")
	return json.Marshal(fields)
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
