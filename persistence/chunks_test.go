package persistence

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// rawChunkT stores data as a raw chunk and returns its hash.
func rawChunkT(t testing.TB, s *Store, data []byte, children ...string) string {
	t.Helper()
	c := carryover.ChunkInput{Hash: chunk.Hash(data), Codec: chunk.CodecRaw, RawLen: int64(len(data)), Data: data, Children: children}
	if _, err := s.PutChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
		t.Fatal(err)
	}
	return c.Hash
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPutChunksDedupAndWrittenBytes(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	a, b := randomBytes(t, 1000), randomBytes(t, 3000)
	ca, err := chunk.Encode(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := chunk.Encode(b, nil)
	// The same chunk twice in one call is stored and counted once.
	n, err := s.PutChunks(ctx, []carryover.ChunkInput{ca, cb, ca})
	if err != nil || n != 4000 {
		t.Fatalf("first put wrote %d (err %v), want 4000", n, err)
	}
	n, err = s.PutChunks(ctx, []carryover.ChunkInput{ca, cb})
	if err != nil || n != 0 {
		t.Fatalf("second put wrote %d (err %v), want 0", n, err)
	}
	c := randomBytes(t, 10)
	cc, _ := chunk.Encode(c, nil)
	n, err = s.PutChunks(ctx, []carryover.ChunkInput{ca, cc})
	if err != nil || n != 10 {
		t.Fatalf("third put wrote %d (err %v), want 10", n, err)
	}
	missing, err := s.MissingChunks(ctx, []string{ca.Hash, chunk.Hash([]byte("x")), cc.Hash, chunk.Hash([]byte("x"))})
	if err != nil || len(missing) != 1 || missing[0] != chunk.Hash([]byte("x")) {
		t.Fatalf("missing %v %v", missing, err)
	}
	got, err := s.ReadChunk(ctx, cb.Hash, []byte("prefix"))
	if err != nil || !bytes.Equal(got, append([]byte("prefix"), b...)) {
		t.Fatalf("ReadChunk appends: err %v, len %d", err, len(got))
	}
}

func TestPutChunksRejectsBadInput(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	data := []byte("hello")
	for name, c := range map[string]carryover.ChunkInput{
		"wrong hash":  {Hash: chunk.Hash([]byte("other")), Codec: chunk.CodecRaw, RawLen: 5, Data: data},
		"bad hash":    {Hash: "XYZ", Codec: chunk.CodecRaw, RawLen: 5, Data: data},
		"wrong len":   {Hash: chunk.Hash(data), Codec: chunk.CodecRaw, RawLen: 6, Data: data},
		"bad codec":   {Hash: chunk.Hash(data), Codec: "lz4", RawLen: 5, Data: data},
		"child unset": {Hash: chunk.Hash(data), Codec: chunk.CodecRaw, RawLen: 5, Data: data, Children: []string{chunk.Hash([]byte("absent"))}},
	} {
		if _, err := s.PutChunks(ctx, []carryover.ChunkInput{c}); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "child unset" && !errors.Is(err, ErrMissingChunk) {
			t.Errorf("%s: %v, want ErrMissingChunk", name, err)
		}
	}
	var n int
	if err := s.DB().Get(&n, `SELECT COUNT(*) FROM chunks`); err != nil || n != 0 {
		t.Fatalf("%d chunks stored after rejected puts (err %v)", n, err)
	}
	// A descriptor may come in the same call as its children, in any order.
	child := []byte("child")
	parent := []byte(`{"chunks":["` + chunk.Hash(child) + `"]}`)
	pc, _ := chunk.Encode(parent, []string{chunk.Hash(child)})
	cc, _ := chunk.Encode(child, nil)
	if _, err := s.PutChunks(ctx, []carryover.ChunkInput{pc, cc}); err != nil {
		t.Fatalf("parent before child in one call: %v", err)
	}
}

func TestZstdRoundTrip(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	text := bytes.Repeat([]byte("carryover keeps your kernel's state. "), 100000) // 3.7 MB, compressible
	c, err := chunk.Encode(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Codec != chunk.CodecZstd || len(c.Data) >= len(text)/10 {
		t.Fatalf("codec %s, %d stored bytes for %d", c.Codec, len(c.Data), len(text))
	}
	n, err := s.PutChunks(ctx, []carryover.ChunkInput{c})
	if err != nil || n != int64(len(c.Data)) {
		t.Fatalf("wrote %d (err %v), want the compressed size %d", n, err, len(c.Data))
	}
	got, err := s.ReadChunk(ctx, c.Hash, nil)
	if err != nil || !bytes.Equal(got, text) {
		t.Fatalf("ReadChunk: err %v, equal %v", err, bytes.Equal(got, text))
	}
	var buf bytes.Buffer
	m, err := s.ReadChunkTo(ctx, c.Hash, &buf)
	if err != nil || m != int64(len(text)) || !bytes.Equal(buf.Bytes(), text) {
		t.Fatalf("ReadChunkTo: %d %v", m, err)
	}

	random := randomBytes(t, 1<<20)
	rc, _ := chunk.Encode(random, nil)
	if rc.Codec != chunk.CodecRaw {
		t.Fatalf("random data stored as %s", rc.Codec)
	}
	if _, err := s.PutChunks(ctx, []carryover.ChunkInput{rc}); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if m, err := s.ReadChunkTo(ctx, rc.Hash, &buf); err != nil || m != 1<<20 || !bytes.Equal(buf.Bytes(), random) {
		t.Fatalf("raw ReadChunkTo: %d %v", m, err)
	}

	if _, err := s.ReadChunk(ctx, chunk.Hash([]byte("absent")), nil); !errors.Is(err, ErrMissingChunk) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing chunk: %v", err)
	}
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	var hashes []string
	for i := range 8 {
		hashes = append(hashes, rawChunkT(t, s, bytes.Repeat([]byte{byte(i)}, 100_000+i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := range 50 {
				h := hashes[(r+i)%len(hashes)]
				var err error
				if buf, err = s.ReadChunk(ctx, h, buf[:0]); err != nil {
					errs <- err
					return
				}
				if _, err := s.ReadChunkTo(ctx, h, io.Discard); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				c, _ := chunk.Encode(randomBytes(t, 50_000), nil)
				if _, err := s.PutChunks(ctx, []carryover.ChunkInput{c}); err != nil {
					errs <- err
					return
				}
				if _, err := s.AppendEvent(ctx, "a", "w", map[string]int{"w": w, "i": i}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if evs, _ := s.ListEvents(ctx, "a", 0, 0, ""); len(evs) != 60 {
		t.Fatalf("%d events", len(evs))
	}
}

func TestReadDetectsCorruption(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	h := rawChunkT(t, s, []byte("precious bytes"))
	if _, err := s.DB().Exec(`UPDATE chunks SET data = ? WHERE hash = ?`, []byte("precious bytez"), h); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadChunk(ctx, h, nil); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("corrupted chunk read: %v", err)
	}
	if _, err := s.ReadChunkTo(ctx, h, &bytes.Buffer{}); err == nil {
		t.Fatal("corrupted chunk streamed")
	}
}
