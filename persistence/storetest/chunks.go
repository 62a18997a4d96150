package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// begin opens a CheckpointWriter that is closed when the test ends (Close is idempotent, so a test may
// close it sooner, which it must before a GC in the same goroutine).
func begin(t *testing.T, s carryover.CheckpointStore) carryover.CheckpointWriter {
	t.Helper()
	w, err := s.BeginCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// raw returns data as a raw chunk input.
func raw(data []byte, children ...string) carryover.ChunkInput {
	return carryover.ChunkInput{Hash: chunk.Hash(data), Codec: chunk.CodecRaw, RawLen: int64(len(data)), Data: data, Children: children}
}

// putRaw stores data as a raw chunk through w and returns its hash.
func putRaw(t *testing.T, w carryover.ChunkWriter, data []byte, children ...string) string {
	t.Helper()
	c := raw(data, children...)
	if _, err := w.PutChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
		t.Fatal(err)
	}
	return c.Hash
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// testChunksPutAndRead: puts are idempotent (bytes written once), missing chunks are reported once
// each in order, reads append to the buffer and decode zstd, unknown chunks are not found.
func testChunksPutAndRead(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	w := begin(t, s)
	a, b := raw(randomBytes(t, 1000)), raw(randomBytes(t, 3000))
	if n, err := w.PutChunks(ctx, []carryover.ChunkInput{a, b, a}); err != nil || n != 4000 {
		t.Fatalf("first put wrote %d (err %v), want 4000 (a chunk twice in one call counts once)", n, err)
	}
	if n, err := w.PutChunks(ctx, []carryover.ChunkInput{a, b}); err != nil || n != 0 {
		t.Fatalf("second put wrote %d (err %v), want 0", n, err)
	}
	absent := chunk.Hash([]byte("absent"))
	missing, err := s.MissingChunks(ctx, []string{a.Hash, absent, b.Hash, absent})
	if err != nil || len(missing) != 1 || missing[0] != absent {
		t.Fatalf("missing %v %v, want [%s]", missing, err, absent)
	}
	if got, err := s.ReadChunk(ctx, b.Hash, []byte("prefix")); err != nil || !bytes.Equal(got, append([]byte("prefix"), b.Data...)) {
		t.Fatalf("ReadChunk appends to buf: err %v, len %d", err, len(got))
	}

	text := bytes.Repeat([]byte("carryover keeps your kernel's state. "), 50000)
	z, err := chunk.Encode(text, nil)
	if err != nil || z.Codec != chunk.CodecZstd {
		t.Fatalf("encode: %v %s", err, z.Codec)
	}
	if n, err := w.PutChunks(ctx, []carryover.ChunkInput{z}); err != nil || n != int64(len(z.Data)) {
		t.Fatalf("zstd put wrote %d (err %v), want the stored size %d", n, err, len(z.Data))
	}
	if got, err := w.ReadChunk(ctx, z.Hash, nil); err != nil || !bytes.Equal(got, text) {
		t.Fatalf("ReadChunk of zstd: %v", err)
	}
	var buf bytes.Buffer
	if n, err := s.ReadChunkTo(ctx, z.Hash, &buf); err != nil || n != int64(len(text)) || !bytes.Equal(buf.Bytes(), text) {
		t.Fatalf("ReadChunkTo of zstd: %d %v", n, err)
	}
	_, err = s.ReadChunk(ctx, absent, nil)
	wantCode(t, "ReadChunk of an unknown hash", err, carryover.CodeNotFound)
	_, err = s.ReadChunkTo(ctx, absent, &buf)
	wantCode(t, "ReadChunkTo of an unknown hash", err, carryover.CodeNotFound)
}

// testChunksRefused: a raw chunk not matching its hash, or a batch naming a child that is neither stored
// nor in the batch, is refused and nothing of the batch is written; a descriptor may precede its
// children in one batch.
func testChunksRefused(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	w := begin(t, s)
	good := raw([]byte("good"))
	bad := raw([]byte("hello"))
	bad.Hash = chunk.Hash([]byte("other"))
	if _, err := w.PutChunks(ctx, []carryover.ChunkInput{good, bad}); err == nil {
		t.Fatal("a raw chunk whose bytes do not match its hash was accepted")
	}
	orphan := raw([]byte("parent"), chunk.Hash([]byte("never stored")))
	_, err := w.PutChunks(ctx, []carryover.ChunkInput{good, orphan})
	if !errors.Is(err, carryover.ErrMissingChunk) {
		t.Fatalf("dangling child: %v, want ErrMissingChunk", err)
	}
	if missing, err := s.MissingChunks(ctx, []string{good.Hash, orphan.Hash, bad.Hash}); err != nil || len(missing) != 3 {
		t.Fatalf("refused batches left chunks behind: missing only %v (%v)", missing, err)
	}
	child := []byte("child")
	parent := raw([]byte(`{"chunks":["`+chunk.Hash(child)+`"]}`), chunk.Hash(child))
	if _, err := w.PutChunks(ctx, []carryover.ChunkInput{parent, raw(child)}); err != nil {
		t.Fatalf("parent before child in one call: %v", err)
	}
	// A child stored by an earlier call counts too.
	if _, err := w.PutChunks(ctx, []carryover.ChunkInput{raw([]byte("second parent"), chunk.Hash(child))}); err != nil {
		t.Fatalf("child stored earlier: %v", err)
	}
}

// testChunksPutConcurrently: writers that put the same new chunks at the same moment (two sessions'
// checkpoints holding identical bytes) all succeed, and the bytes are counted as written once. On
// PostgreSQL the second INSERT failed on the primary key, which failed that whole checkpoint.
func testChunksPutConcurrently(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	for round := range 5 {
		chunks := []carryover.ChunkInput{raw(randomBytes(t, 500)), raw(randomBytes(t, 700)), raw(randomBytes(t, 900))}
		const writers = 6
		written := make([]int64, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		done := make(chan int)
		for i := range writers {
			go func() {
				w, err := s.BeginCheckpoint(ctx)
				if err != nil {
					errs[i] = err
					done <- i
					return
				}
				defer w.Close()
				<-start
				written[i], errs[i] = w.PutChunks(ctx, chunks)
				done <- i
			}()
		}
		close(start)
		var total int64
		for range writers {
			i := <-done
			if errs[i] != nil {
				t.Fatalf("round %d: writer %d: %v", round, i, errs[i])
			}
			total += written[i]
		}
		if total != 2100 {
			t.Fatalf("round %d: %d bytes counted as written in all, want 2100 (each chunk once)", round, total)
		}
	}
}
