package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/jmoiron/sqlx"
)

// shareGCLock takes the GC lock row in share mode for the rest of tx: a GC (which takes it FOR
// UPDATE) either finished before, and then tx sees what it swept, or starts after tx commits, and
// then sees tx's pins and roots.
func shareGCLock(ctx context.Context, tx *sqlx.Tx) error {
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM gc_lock WHERE id = 1 FOR SHARE`); err != nil {
		return fmt.Errorf("gc lock: %w", err)
	}
	return nil
}

// errReupload: a large chunk that was stored when the put looked was collected before its
// transaction pinned it; the put uploads it and tries again.
var errReupload = errors.New("a chunk was collected during the put")

// putChunks stores the chunks not stored yet, pins every one of them (new or already stored) for
// writer, and returns the stored bytes newly written. Every chunk is checked first (chunk.Check);
// every child of a new chunk must be stored by the end of the call, or nothing is recorded and the
// error wraps carryover.ErrMissingChunk.
//
// With an object store, large chunks are uploaded first, outside any transaction, each under a key
// of its own; the catalog transaction then records the keys. An upload that fails fails the put
// (nothing recorded). An uploaded object that the transaction did not record (another writer stored
// the chunk first) is deleted; one whose transaction's outcome is unknown (the connection broke at
// COMMIT) is left for GC's orphan sweep, which deletes it only if the catalog does not name it.
func (s *Store) putChunks(ctx context.Context, writer string, chunks []carryover.ChunkInput) (int64, error) {
	for i := range chunks {
		if err := chunk.Check(&chunks[i]); err != nil {
			return 0, err
		}
	}
	uploaded := map[string]objectRef{} // hash -> where this put uploaded it
	for attempt := 0; ; attempt++ {
		if err := s.upload(ctx, chunks, uploaded); err != nil {
			return 0, err
		}
		if s.testHookBeforePutTx != nil {
			s.testHookBeforePutTx()
		}
		var written int64
		var used map[string]bool
		err := s.tx(ctx, func(tx *sqlx.Tx) error {
			if err := shareGCLock(ctx, tx); err != nil {
				return err
			}
			var parents []*carryover.ChunkInput
			var err error
			written, parents, used, err = s.insertChunks(ctx, tx, writer, chunks, uploaded)
			if err != nil {
				return err
			}
			return checkChildren(ctx, tx, parents)
		})
		if errors.Is(err, errReupload) && attempt < 3 {
			continue
		}
		if err != nil {
			return 0, err
		}
		s.dropUnused(uploaded, used)
		return written, nil
	}
}

// bigChunk reports whether c goes to the object store.
func (s *Store) bigChunk(c *carryover.ChunkInput) bool {
	return s.opts.Objects != nil && len(c.Data) > s.opts.InlineMax
}

// uploadWorkers is how many objects one put uploads at once: an object store answers each request
// after a round trip and a write of its own, so uploads in parallel keep the link busy (one at a
// time, an import of 100 MB spent most of its time waiting on them). 8: an import's batch (8 MiB of
// 1 MiB chunks) goes in one round.
const uploadWorkers = 8

// upload puts the large chunks the catalog lacks and this put has not uploaded yet, in packs
// (chunks_pack.go), recording their references. An upload is not written into this node's cache:
// that disk write cost the importing server as much CPU as the rest of its import (6 ms per MiB on
// a loaded machine); the first read fills the cache instead. An upload that failed leaves the
// others' references recorded, so dropUnused or the orphan sweep takes them.
func (s *Store) upload(ctx context.Context, chunks []carryover.ChunkInput, uploaded map[string]objectRef) error {
	var big []string
	for i := range chunks {
		if s.bigChunk(&chunks[i]) && uploaded[chunks[i].Hash].key == "" {
			big = append(big, chunks[i].Hash)
		}
	}
	if len(big) == 0 {
		return nil
	}
	var missing []string
	err := s.read(ctx, func() (err error) { missing, err = missingIn(ctx, s.db, big); return err })
	if err != nil {
		return fmt.Errorf("put chunks: %w", err)
	}
	want := map[string]bool{}
	for _, h := range missing {
		want[h] = true
	}
	var todo []*carryover.ChunkInput
	for i := range chunks {
		if c := &chunks[i]; want[c.Hash] && uploaded[c.Hash].key == "" {
			want[c.Hash] = false // a hash twice in one batch is uploaded once
			todo = append(todo, c)
		}
	}
	return s.uploadPacks(ctx, todo, uploaded)
}

// dropUnused deletes the objects this put uploaded of which the committed transaction recorded no
// chunk (best effort: the orphan sweep takes what this misses). A pack some of whose chunks another
// writer stored first stays: its recorded chunks name it, and GC deletes it with the last of them.
func (s *Store) dropUnused(uploaded map[string]objectRef, used map[string]bool) {
	keep := map[string]bool{}
	for h, r := range uploaded {
		if used[h] {
			keep[r.key] = true
		}
	}
	var keys []string
	for _, r := range uploaded {
		if !keep[r.key] {
			keep[r.key] = true // each key once
			keys = append(keys, r.key)
		}
	}
	if len(keys) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.opts.Objects.Delete(ctx, keys)
	}
}

// missingIn returns those of hashes with no chunks row, in input order, each once.
func missingIn(ctx context.Context, q sqlx.QueryerContext, hashes []string) ([]string, error) {
	if len(hashes) == 0 {
		return nil, nil
	}
	var found []string
	if err := sqlx.SelectContext(ctx, q, &found, `SELECT hash FROM chunks WHERE hash = ANY($1::text[])`, hashes); err != nil {
		return nil, fmt.Errorf("look up chunks: %w", err)
	}
	present := make(map[string]bool, len(hashes))
	for _, h := range found {
		present[h] = true
	}
	var missing []string
	for _, h := range hashes {
		if !present[h] {
			present[h] = true
			missing = append(missing, h)
		}
	}
	return missing, nil
}
