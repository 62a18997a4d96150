package postgres

import (
	"bytes"
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
	var missing []string
	err := s.read(ctx, func() (err error) { missing, err = missingIn(ctx, s.db, hashes); return err })
	if err != nil {
		return nil, fmt.Errorf("missing chunks: %w", err)
	}
	return missing, nil
}

// ReadChunk appends the raw bytes of a chunk to buf and returns the result; they are checked against
// the hash. A chunk that is not stored is CodeNotFound, wrapping carryover.ErrMissingChunk. A chunk in
// this node's cache is decoded and verified once, straight into buf.
func (s *Store) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	codec, rawLen, data, obj, err := s.catalogChunk(ctx, hash)
	if err != nil {
		return buf, err
	}
	return s.readRow(ctx, hash, catalogRow{codec: codec, rawLen: rawLen, data: data, obj: obj}, buf)
}

// readRow appends the raw bytes of the chunk of catalog row r to buf: inline, from the node's
// cache, or from the object store; verified against the hash.
func (s *Store) readRow(ctx context.Context, hash string, r catalogRow, buf []byte) ([]byte, error) {
	data := r.data
	if r.obj.key != "" {
		if out, ok := s.cache.getRaw(hash, r.codec, r.rawLen, buf); ok {
			return out, nil
		}
		var err error
		if data, err = s.fetchObject(ctx, hash, r.obj); err != nil {
			return buf, err
		}
	}
	start := len(buf)
	out, err := chunk.Decode(r.codec, data, buf)
	if err != nil {
		return buf, fmt.Errorf("read chunk %s: decode: %w", hash, err)
	}
	if err := chunk.Verify(hash, r.rawLen, out[start:]); err != nil {
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
	return writeChunk(hash, out, w)
}

// writeChunk writes a chunk's raw bytes to w.
func writeChunk(hash string, out []byte, w io.Writer) (int64, error) {
	n, err := w.Write(out)
	if err != nil {
		return int64(n), fmt.Errorf("read chunk %s: write: %w", hash, err)
	}
	return int64(n), nil
}

// storedChunk returns the stored form of a chunk: inline, or from the node's cache, or from its object.
func (s *Store) storedChunk(ctx context.Context, hash string) (codec string, rawLen int64, data []byte, err error) {
	codec, rawLen, data, obj, err := s.catalogChunk(ctx, hash)
	if err != nil || obj.key == "" {
		return codec, rawLen, data, err
	}
	if data, ok := s.cache.get(hash, codec, rawLen); ok {
		return codec, rawLen, data, nil
	}
	data, err = s.fetchObject(ctx, hash, obj)
	return codec, rawLen, data, err
}

// objectSpan is where a chunk's stored bytes are in the object store: its object, and for a packed
// chunk its byte range in it (off nil: the whole object).
type objectSpan struct {
	key string
	off *int64
	n   int64
}

// catalogChunk is a chunk's catalog row: its codec, raw length, and either its bytes (inline) or
// where its object is.
func (s *Store) catalogChunk(ctx context.Context, hash string) (codec string, rawLen int64, data []byte, obj objectSpan, err error) {
	var k sql.NullString
	var off sql.NullInt64
	err = s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, `SELECT codec, raw_len, stored_len, data, object_key, object_offset FROM chunks WHERE hash = $1`, hash).
			Scan(&codec, &rawLen, &obj.n, &data, &k, &off)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil, obj, carryover.Wrap(carryover.CodeNotFound, carryover.ErrMissingChunk, "chunk %s is not stored", hash)
	}
	if err != nil {
		return "", 0, nil, obj, fmt.Errorf("read chunk %s: %w", hash, err)
	}
	obj.key = k.String
	if off.Valid {
		obj.off = &off.Int64
	}
	return codec, rawLen, data, obj, nil
}

// fetchObject reads a chunk's stored bytes from the object store (its object, or its range of a
// pack read whole) and keeps them in the node's cache (behind the read: a restore does not wait on the cache's
// disk write).
func (s *Store) fetchObject(ctx context.Context, hash string, obj objectSpan) ([]byte, error) {
	if s.opts.Objects == nil {
		return nil, fmt.Errorf("read chunk %s: it is in the object store (%s) and none is configured", hash, obj.key)
	}
	var data []byte
	var err error
	if obj.off == nil {
		data, err = s.opts.Objects.Get(ctx, obj.key)
	} else {
		data, err = s.packedChunk(ctx, obj)
	}
	if err != nil {
		return nil, fmt.Errorf("read chunk %s: %w", hash, err)
	}
	s.cache.putBehind(hash, data)
	return data, nil
}

// packedChunk is a packed chunk's stored bytes, a copy of its range of the pack, which the node
// reads whole once for all its chunks (pack_reads.go). A pack shorter than the range is an error.
func (s *Store) packedChunk(ctx context.Context, obj objectSpan) ([]byte, error) {
	// The fetch outlives a reader that gives up: another may be waiting on it (the bucket's
	// timeout bounds it).
	fetchCtx := context.WithoutCancel(ctx)
	pack, err := s.packs.get(ctx, obj.key, func() ([]byte, error) { return s.opts.Objects.Get(fetchCtx, obj.key) })
	if err != nil {
		return nil, err
	}
	off := *obj.off
	if off < 0 || obj.n < 0 || off+obj.n > int64(len(pack)) {
		return nil, fmt.Errorf("pack %s has %d bytes, the chunk is at %d+%d", obj.key, len(pack), off, obj.n)
	}
	return bytes.Clone(pack[off : off+obj.n]), nil
}

// ReadStoredChunk appends the STORED bytes of a chunk (as kept: compressed when its codec is zstd)
// to buf and returns its codec, raw length and the bytes. They are not verified: a caller copying
// chunks elsewhere (an export) verifies them itself, and spares decoding and encoding them again.
func (s *Store) ReadStoredChunk(ctx context.Context, hash string, buf []byte) (string, int64, []byte, error) {
	codec, rawLen, data, err := s.storedChunk(ctx, hash)
	if err != nil {
		return "", 0, buf, err
	}
	return codec, rawLen, append(buf, data...), nil
}
