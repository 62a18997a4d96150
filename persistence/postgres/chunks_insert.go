package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
)

// chunkRows are the chunks rows one put inserts, column by column, in hash order (so two puts that
// share chunks take their row locks in the same order), for one INSERT ... SELECT unnest: a put of
// 16 chunks is one round trip to the database, not 16.
type chunkRows struct {
	hashes, codecs      []string
	rawLens, storedLens []int64
	data                [][]byte  // nil for a chunk in the object store
	keys                []*string // nil for a chunk kept inline
	offsets             []*int64  // a packed chunk's offset in its object; nil for a whole object
	byHash              map[string]*carryover.ChunkInput
}

// insertChunks pins every chunk, inserts the ones not stored yet with their edges (large ones under
// their uploaded key), and returns the stored bytes written, the inserted chunks that have children,
// and the hashes whose uploaded key it recorded.
func (s *Store) insertChunks(ctx context.Context, tx *sqlx.Tx, writer string, chunks []carryover.ChunkInput,
	uploaded map[string]objectRef) (int64, []*carryover.ChunkInput, map[string]bool, error) {
	hashes := make([]string, len(chunks))
	for i := range chunks {
		hashes[i] = chunks[i].Hash
	}
	// Pin first: from here on no GC takes these hashes, stored or not.
	if _, err := tx.ExecContext(ctx, `INSERT INTO chunk_pins (writer_id, hash) SELECT $1, unnest($2::text[])
		ON CONFLICT DO NOTHING`, writer, hashes); err != nil {
		return 0, nil, nil, fmt.Errorf("put chunks: pin: %w", err)
	}
	missing, err := missingIn(ctx, tx, hashes)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("put chunks: %w", err)
	}
	rows, err := s.rowsOf(chunks, missing, uploaded)
	if err != nil {
		return 0, nil, nil, err
	}
	inserted, err := rows.insert(ctx, tx)
	if err != nil {
		return 0, nil, nil, err
	}
	var written int64
	var parents []*carryover.ChunkInput
	used := map[string]bool{}
	for _, h := range inserted { // the others were stored by another writer meanwhile: its object, its edges
		c := rows.byHash[h]
		written += int64(len(c.Data))
		if s.bigChunk(c) {
			used[h] = true
		}
		if len(c.Children) > 0 {
			parents = append(parents, c)
		}
	}
	return written, parents, used, insertRefs(ctx, tx, parents)
}

// rowsOf are the rows of the chunks named in missing (each once); a large one this put has no
// upload for (it was stored when the put looked, and collected since) is errReupload.
func (s *Store) rowsOf(chunks []carryover.ChunkInput, missing []string, uploaded map[string]objectRef) (*chunkRows, error) {
	r := &chunkRows{byHash: make(map[string]*carryover.ChunkInput, len(missing))}
	want := make(map[string]bool, len(missing))
	for _, h := range missing {
		want[h] = true
	}
	for i := range chunks {
		if c := &chunks[i]; want[c.Hash] && r.byHash[c.Hash] == nil {
			r.byHash[c.Hash] = c
			r.hashes = append(r.hashes, c.Hash)
		}
	}
	slices.Sort(r.hashes)
	for _, h := range r.hashes {
		c := r.byHash[h]
		var data []byte
		var key *string
		var off *int64
		if s.bigChunk(c) {
			ref := uploaded[h]
			if ref.key == "" {
				return nil, errReupload
			}
			key, off = &ref.key, ref.off
		} else if data = c.Data; data == nil {
			data = []byte{}
		}
		r.codecs, r.rawLens, r.storedLens = append(r.codecs, c.Codec), append(r.rawLens, c.RawLen), append(r.storedLens, int64(len(c.Data)))
		r.data, r.keys, r.offsets = append(r.data, data), append(r.keys, key), append(r.offsets, off)
	}
	return r, nil
}

// insert writes the rows and returns the hashes it inserted. ON CONFLICT: another writer may store
// the same bytes between missingIn and here (two sessions' checkpoints holding an identical chunk,
// at once): its row is the same chunk, and a unique violation would fail this whole checkpoint.
func (r *chunkRows) insert(ctx context.Context, tx *sqlx.Tx) ([]string, error) {
	if len(r.hashes) == 0 {
		return nil, ctx.Err()
	}
	var inserted []string
	err := tx.SelectContext(ctx, &inserted, `INSERT INTO chunks (hash, codec, raw_len, stored_len, created_at, data, object_key, object_offset)
		SELECT h, c, r, s, $5, d, k, o FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $6::bytea[], $7::text[], $8::bigint[])
		AS t(h, c, r, s, d, k, o) ON CONFLICT (hash) DO NOTHING RETURNING hash`,
		r.hashes, r.codecs, r.rawLens, r.storedLens, nsOf(time.Time{}), r.data, r.keys, r.offsets)
	if err != nil {
		return nil, fmt.Errorf("put chunks %s..: %w", r.hashes[0], err)
	}
	return inserted, nil
}

// insertRefs records the edges of the inserted parents, in one statement.
func insertRefs(ctx context.Context, tx *sqlx.Tx, parents []*carryover.ChunkInput) error {
	var ps, cs []string
	for _, p := range parents {
		for _, c := range p.Children {
			ps, cs = append(ps, p.Hash), append(cs, c)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO chunk_refs (parent, child) SELECT * FROM unnest($1::text[], $2::text[])
		ON CONFLICT DO NOTHING`, ps, cs); err != nil {
		return fmt.Errorf("put chunk %s: refs: %w", ps[0], err)
	}
	return nil
}

// checkChildren fails with ErrMissingChunk when a child of parents is not stored (one look-up for
// all of them). The deferred foreign key would refuse a dangling child at COMMIT too; checking here
// names it.
func checkChildren(ctx context.Context, tx *sqlx.Tx, parents []*carryover.ChunkInput) error {
	var all []string
	for _, p := range parents {
		all = append(all, p.Children...)
	}
	missing, err := missingIn(ctx, tx, all)
	if err != nil || len(missing) == 0 {
		return err
	}
	for _, p := range parents {
		if slices.Contains(p.Children, missing[0]) {
			return fmt.Errorf("put chunk %s: child %s: %w", p.Hash, missing[0], carryover.ErrMissingChunk)
		}
	}
	return fmt.Errorf("put chunks: child %s: %w", missing[0], carryover.ErrMissingChunk)
}
