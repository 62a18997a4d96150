package persistence

import (
	"context"
	"slices"
	"strings"

	"github.com/carryover/carryover/persistence/chunk"
)

// A checkpoint's roots keep its chunks from GC. Each workspace file's descriptor was a root: a
// folder of 10,000 distinct files made every turn insert 10,000 root rows and prune 10,000 more
// (SQLite: 60-340 ms a turn, growing with the index). Past indexMin files the descriptors are
// reached through a two-level index instead, as chunks whose children (chunk_refs edges, which GC
// follows) are the descriptors: 256 buckets by the descriptor hash's first two hex digits, and a
// top chunk listing the buckets, the checkpoint's one files root. A turn that changed no file finds
// its top stored and writes nothing; one that changed a file writes its bucket (~1/256 of the
// files) and the top. The manifest still lists every file: restores, exports and diffs read it as
// before.

// indexMin is the number of distinct file descriptors from which they are indexed, not roots.
const indexMin = 256

// fileRoots are the roots that keep refs (the files' descriptors) alive, putting through b the
// index chunks they need.
func fileRoots(ctx context.Context, b *chunkBatch, refs []string) ([]string, error) {
	refs = slices.Compact(slices.Sorted(slices.Values(refs)))
	if len(refs) < indexMin || len(refs[0]) < 2 { // sorted: a ref too short to bucket comes first
		return refs, nil
	}
	var buckets [][]string
	for start := 0; start < len(refs); {
		end := start + 1
		for end < len(refs) && refs[end][:2] == refs[start][:2] {
			end++
		}
		buckets = append(buckets, refs[start:end])
		start = end
	}
	raws := make([][]byte, len(buckets))
	hashes := make([]string, len(buckets))
	for i, bk := range buckets {
		raws[i] = []byte("carryover files index v1\n" + strings.Join(bk, "\n"))
		hashes[i] = chunk.Hash(raws[i])
	}
	topRaw := []byte("carryover files index top v1\n" + strings.Join(hashes, "\n"))
	top := chunk.Hash(topRaw)
	// A stored chunk's children are stored (PutChunks checks them): a stored top is the whole index.
	if missing, err := b.w.MissingChunks(ctx, []string{top}); err != nil || len(missing) == 0 {
		return []string{top}, err
	}
	missing, err := b.w.MissingChunks(ctx, hashes)
	if err != nil {
		return nil, err
	}
	for i, h := range hashes {
		if slices.Contains(missing, h) {
			if _, err := b.add(ctx, raws[i], buckets[i]); err != nil {
				return nil, err
			}
		}
	}
	if _, err := b.add(ctx, topRaw, hashes); err != nil {
		return nil, err
	}
	return []string{top}, b.flush(ctx)
}
