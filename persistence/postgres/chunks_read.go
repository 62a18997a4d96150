package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// MissingChunks returns the subset of hashes not in the store, in input order, each once.
func (s *Store) MissingChunks(ctx context.Context, hashes []string) ([]string, error) {
	missing, err := missingIn(ctx, s.db, hashes)
	if err != nil {
		return nil, fmt.Errorf("missing chunks: %w", err)
	}
	return missing, nil
}

// ReadChunk appends the raw bytes of a chunk to buf and returns the result; they are checked against
// the hash. A chunk that is not stored is CodeNotFound, wrapping carryover.ErrMissingChunk.
func (s *Store) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	codec, rawLen, data, err := s.storedChunk(ctx, hash)
	if err != nil {
		return buf, err
	}
	start := len(buf)
	out, err := chunk.Decode(codec, data, buf)
	if err != nil {
		return buf, fmt.Errorf("read chunk %s: decode: %w", hash, err)
	}
	if err := chunk.Verify(hash, rawLen, out[start:]); err != nil {
		return buf, fmt.Errorf("read chunk %s: %w", hash, err)
	}
	return out, nil
}

// ReadChunkTo writes the raw bytes of a chunk to w and returns how many it wrote.
func (s *Store) ReadChunkTo(ctx context.Context, hash string, w io.Writer) (int64, error) {
	out, err := s.ReadChunk(ctx, hash, nil)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(out)
	if err != nil {
		return int64(n), fmt.Errorf("read chunk %s: write: %w", hash, err)
	}
	return int64(n), nil
}

// storedChunk returns the stored form of a chunk: inline, or from the node's cache, or from its object.
func (s *Store) storedChunk(ctx context.Context, hash string) (codec string, rawLen int64, data []byte, err error) {
	var key sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT codec, raw_len, data, object_key FROM chunks WHERE hash = $1`, hash).
		Scan(&codec, &rawLen, &data, &key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil, carryover.Wrap(carryover.CodeNotFound, carryover.ErrMissingChunk, "chunk %s is not stored", hash)
	}
	if err != nil {
		return "", 0, nil, fmt.Errorf("read chunk %s: %w", hash, err)
	}
	if !key.Valid {
		return codec, rawLen, data, nil
	}
	if data, ok := s.cache.get(hash, codec, rawLen); ok {
		return codec, rawLen, data, nil
	}
	if s.opts.Objects == nil {
		return "", 0, nil, fmt.Errorf("read chunk %s: it is in the object store (%s) and none is configured", hash, key.String)
	}
	data, err = s.opts.Objects.Get(ctx, key.String)
	if err != nil {
		return "", 0, nil, fmt.Errorf("read chunk %s: %w", hash, err)
	}
	s.cache.put(hash, data)
	return codec, rawLen, data, nil
}
