package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/format"
	"golang.org/x/sync/errgroup"
)

// An object store charges each request about as much as a MiB of its body (Versity: ~3 ms of CPU a
// request, ~3.5 ms a MiB), so one put's large chunks go up together in packs of up to
// Options.PackMax bytes: a chunk's object is then a byte range of its pack (chunks.object_offset,
// migration 0010). A pack belongs to the one put that uploaded it; no later put adds to it, so GC
// deletes it exactly when no chunk row names it any more (gc.go), and an upload whose put never
// commits is an orphan like any other (sweepOrphans). Packs are written only while the cluster
// writes format.Packs or newer: a node of an older build would read a pack whole and fail the
// chunk's checksum.

// objectRef is where this put uploaded a chunk: its object's key and, for a packed chunk, its offset
// in it (nil: the whole object).
type objectRef struct {
	key string
	off *int64
}

// packsOf groups chunks, in their order, into packs of at most max stored bytes (a chunk larger than
// max alone); max <= 0 puts each chunk alone.
func packsOf(chunks []*carryover.ChunkInput, max int) [][]*carryover.ChunkInput {
	var packs [][]*carryover.ChunkInput
	var cur []*carryover.ChunkInput
	size := 0
	for _, c := range chunks {
		if len(cur) > 0 && (max <= 0 || size+len(c.Data) > max) {
			packs, cur, size = append(packs, cur), nil, 0
		}
		cur, size = append(cur, c), size+len(c.Data)
	}
	if len(cur) > 0 {
		packs = append(packs, cur)
	}
	return packs
}

// uploadPacks uploads todo in packs, uploadWorkers at a time, recording each chunk's reference in
// uploaded. A pack of one chunk is an object of its own, named for its hash as before packs.
func (s *Store) uploadPacks(ctx context.Context, todo []*carryover.ChunkInput, uploaded map[string]objectRef) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(uploadWorkers)
	max := s.opts.PackMax
	if s.Format() < format.Packs { // a live node of an older build reads each chunk's object whole
		max = -1
	}
	for _, pack := range packsOf(todo, max) {
		g.Go(func() error {
			refs, key, parts := packBody(pack, s.objectKey(pack))
			if err := s.opts.Objects.PutParts(gctx, key, parts); err != nil {
				return fmt.Errorf("put chunk %s: %w", pack[0].Hash, err)
			}
			mu.Lock()
			for h, r := range refs {
				uploaded[h] = r
			}
			mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// packBody is the object of pack under key, as parts: the chunks' stored bytes one after the other,
// with each chunk's reference (a pack of one is the chunk's own object, with no offset).
func packBody(pack []*carryover.ChunkInput, key string) (map[string]objectRef, string, [][]byte) {
	refs := make(map[string]objectRef, len(pack))
	if len(pack) == 1 {
		refs[pack[0].Hash] = objectRef{key: key}
		return refs, key, [][]byte{pack[0].Data}
	}
	parts := make([][]byte, len(pack))
	var off int64
	for i, c := range pack {
		at := off
		refs[c.Hash] = objectRef{key: key, off: &at}
		parts[i] = c.Data
		off += int64(len(c.Data))
	}
	return refs, key, parts
}

// objectKey is a key for a new upload of pack: <prefix><hash[:2]>/<hash>.<unique> for one chunk,
// <prefix>packs/<first hash[:2]>/<first hash>.<unique> for several. Unique, so that a GC deleting
// the object of a collected chunk never deletes a newer upload of the same content.
func (s *Store) objectKey(pack []*carryover.ChunkInput) string {
	b := make([]byte, 8)
	rand.Read(b)
	hash := pack[0].Hash
	dir := ""
	if len(pack) > 1 {
		dir = "packs/"
	}
	return fmt.Sprintf("%s%s%s/%s.%s", s.opts.ObjectPrefix, dir, hash[:min(2, len(hash))], hash, hex.EncodeToString(b))
}
