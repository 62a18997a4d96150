package postgres

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/carryover/carryover"
)

// TestReaderForReadsAsTheStore: a reader whose object chunks were looked up ahead answers what the
// store answers: an object chunk (packed with another), an inline one (looked up when read), one it
// was not asked for, and one not stored (CodeNotFound, wrapping ErrMissingChunk), through
// ReadChunk and ReadChunkTo.
func TestReaderForReadsAsTheStore(t *testing.T) {
	ctx := context.Background()
	s := storeT(t, Options{Objects: bucketT(t, ""), InlineMax: 1000})
	sessionT(t, s, "s")
	big, other, small := rawChunk(randomT(t, 5000)), rawChunk(randomT(t, 6000)), rawChunk([]byte("small"))
	putCommit(t, s, "s", "c1", big, other, small)
	gone := rawChunk([]byte("never stored"))
	r, err := s.ReaderFor(ctx, []string{big.Hash, small.Hash, gone.Hash, big.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if rows := r.(*readerAhead).rows; len(rows) != 1 || rows[big.Hash].obj.key == "" {
		t.Fatalf("held rows %+v: want the object chunk's alone (an inline one's bytes are read when it is)", rows)
	}
	for _, c := range []carryover.ChunkInput{big, small, other} {
		got, err := r.ReadChunk(ctx, c.Hash, []byte("x"))
		if err != nil || !bytes.Equal(got, append([]byte("x"), c.Data...)) {
			t.Fatalf("ReadChunk %s: %d bytes, %v", c.Hash, len(got), err)
		}
		var w bytes.Buffer
		if n, err := r.ReadChunkTo(ctx, c.Hash, &w); err != nil || n != int64(len(c.Data)) || !bytes.Equal(w.Bytes(), c.Data) {
			t.Fatalf("ReadChunkTo %s: %d, %v", c.Hash, n, err)
		}
	}
	if _, err := r.ReadChunk(ctx, gone.Hash, nil); carryover.ErrorCode(err) != carryover.CodeNotFound || !errors.Is(err, carryover.ErrMissingChunk) {
		t.Fatalf("a chunk not stored: %v, want not_found wrapping ErrMissingChunk", err)
	}
}
