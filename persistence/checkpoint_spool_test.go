package persistence

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/carryover/carryover/persistence/chunk"
)

// TestIngestSpoolRefusesLinks: a (sandboxed, hostile) kernel must not make the server read a host file
// into its checkpoint by planting a symlink, as a chunk file or as the token dir, or block it with a FIFO.
func TestIngestSpoolRefusesLinks(t *testing.T) {
	s := storeT(t)
	w := writerT(t, s)
	ctx := context.Background()
	spool := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("ab", 16)
	spooled := []spoolChunk{{Hash: hash, Codec: "raw", RawLen: 11, Stored: 11, File: hash}}

	// A symlinked chunk file.
	tok := filepath.Join(spool, "tok1")
	_ = os.Mkdir(tok, 0o700)
	if err := os.Symlink(secret, filepath.Join(tok, hash)); err != nil {
		t.Fatal(err)
	}
	if _, err := ingestSpool(ctx, w, tok, spooled); err == nil {
		t.Error("a symlinked chunk file was read")
	}
	// A symlinked token dir.
	real := filepath.Join(t.TempDir(), "elsewhere")
	_ = os.Mkdir(real, 0o700)
	_ = os.WriteFile(filepath.Join(real, hash), []byte("host secret"), 0o600)
	if err := os.Symlink(real, filepath.Join(spool, "tok2")); err != nil {
		t.Fatal(err)
	}
	if _, err := ingestSpool(ctx, w, filepath.Join(spool, "tok2"), spooled); err == nil {
		t.Error("a symlinked token dir was followed")
	}
	// A FIFO must fail at once, not block.
	tok3 := filepath.Join(spool, "tok3")
	_ = os.Mkdir(tok3, 0o700)
	if err := syscall.Mkfifo(filepath.Join(tok3, hash), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ingestSpool(ctx, w, tok3, spooled); err == nil {
		t.Error("a FIFO was accepted")
	}
	if missing, _ := s.MissingChunks(ctx, []string{hash}); len(missing) != 1 {
		t.Error("the host secret was stored as a chunk")
	}
	// A plain file still works.
	tok4 := filepath.Join(spool, "tok4")
	_ = os.Mkdir(tok4, 0o700)
	data := []byte("kernel data")
	h := chunk.Hash(data)
	_ = os.WriteFile(filepath.Join(tok4, h), data, 0o600)
	if _, err := ingestSpool(ctx, w, tok4, []spoolChunk{{Hash: h, Codec: "raw", RawLen: 11, Stored: 11, File: h}}); err != nil {
		t.Errorf("a plain chunk file: %v", err)
	}
}

// TestSpoolHostConfined: with SpoolRoot set, only its direct subdirectories are believed as the spool
// dir a kernel names.
func TestSpoolHostConfined(t *testing.T) {
	root := t.TempDir()
	_ = os.Mkdir(filepath.Join(root, "k1"), 0o700)
	_ = os.Symlink("/etc", filepath.Join(root, "k2"))
	c := &Checkpointer{SpoolRoot: root}
	if h, err := c.spoolHost(filepath.Join(root, "k1") + "/"); err != nil || h != filepath.Join(root, "k1") {
		t.Errorf("a spool dir: %q %v", h, err)
	}
	for _, bad := range []string{"/etc", root, filepath.Join(root, ".."), filepath.Join(root, "k1/sub"),
		filepath.Join(root, "k2"), filepath.Join(root, "missing"), filepath.Join(root, "k1/../../x")} {
		if _, err := c.spoolHost(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestBufListKeepsAFewBuffers: buffers outlive a checkpoint (and any GC), up to max of them, none
// larger than spoolBufMaxCap, and each comes back empty with its capacity.
func TestBufListKeepsAFewBuffers(t *testing.T) {
	l := bufList{max: 2}
	if l.get() != nil {
		t.Fatal("an empty list gave a buffer")
	}
	for range 3 {
		l.put(make([]byte, 10, 1<<20))
	}
	l.put(make([]byte, 0, spoolBufMaxCap+1))
	l.put(nil)
	runtime.GC() // twice: a sync.Pool keeps its items through one collection
	runtime.GC()
	for i := range 2 {
		b := l.get()
		if b == nil || len(b) != 0 || cap(b) != 1<<20 {
			t.Fatalf("buffer %d: len %d cap %d, want a kept empty 1 MiB buffer", i, len(b), cap(b))
		}
	}
	if b := l.get(); b != nil {
		t.Fatalf("a third buffer was kept (cap %d): the list holds at most 2, none over %d bytes", cap(b), spoolBufMaxCap)
	}
}

// TestIngestSpoolChecksCompressedChunks: a compressed chunk from the kernel is decoded and checked
// against its address before it is stored (a hostile kernel must not store garbage under the address
// of data another session saves later, e.g. a zeroed chunk), and a true one goes in.
func TestIngestSpoolChecksCompressedChunks(t *testing.T) {
	s := storeT(t)
	w := writerT(t, s)
	ctx := context.Background()
	dir := t.TempDir()
	garbage := []byte(strings.Repeat("not the zeros you were looking for. ", 4096))
	enc, err := chunk.Encode(garbage, nil)
	if err != nil || enc.Codec != chunk.CodecZstd {
		t.Fatalf("encode: %v %s", err, enc.Codec)
	}
	zeros := chunk.Hash(make([]byte, len(garbage)))
	if err := os.WriteFile(filepath.Join(dir, "f"), enc.Data, 0o600); err != nil {
		t.Fatal(err)
	}
	forged := spoolChunk{Hash: zeros, Codec: chunk.CodecZstd, RawLen: int64(len(garbage)), Stored: int64(len(enc.Data)), File: "f"}
	if _, err := ingestSpool(ctx, w, dir, []spoolChunk{forged}); err == nil || !strings.Contains(err.Error(), "does not match its address") {
		t.Fatalf("a compressed chunk under another content's address: %v", err)
	}
	if missing, err := s.MissingChunks(ctx, []string{zeros}); err != nil || len(missing) != 1 {
		t.Fatalf("the forged chunk was stored: missing %v, %v", missing, err)
	}
	huge := forged
	huge.Hash, huge.RawLen = enc.Hash, 1<<40
	if _, err := ingestSpool(ctx, w, dir, []spoolChunk{huge}); err == nil || !strings.Contains(err.Error(), "raw bytes") {
		t.Fatalf("a chunk claiming 1 TiB raw: %v", err)
	}
	genuine := forged
	genuine.Hash = enc.Hash
	if _, err := ingestSpool(ctx, w, dir, []spoolChunk{genuine}); err != nil {
		t.Fatalf("a true compressed chunk: %v", err)
	}
}

// TestIngestSpoolChecksEveryChunkOfABatch: a batch's compressed chunks are checked on several
// goroutines; one forged chunk among many true ones fails the batch, named, and none of the batch
// is stored (all or none), whichever worker met it.
func TestIngestSpoolChecksEveryChunkOfABatch(t *testing.T) {
	s := storeT(t)
	w := writerT(t, s)
	ctx := context.Background()
	dir := t.TempDir()
	var (
		batch  []spoolChunk
		hashes []string
	)
	for i := range 40 {
		raw := []byte(strings.Repeat(fmt.Sprintf("record %d of the batch; ", i), 2000))
		enc, err := chunk.Encode(raw, nil)
		if err != nil || enc.Codec != chunk.CodecZstd {
			t.Fatalf("encode: %v %s", err, enc.Codec)
		}
		name := fmt.Sprintf("c%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), enc.Data, 0o600); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, spoolChunk{Hash: enc.Hash, Codec: enc.Codec, RawLen: enc.RawLen, Stored: int64(len(enc.Data)), File: name})
		hashes = append(hashes, enc.Hash)
	}
	forged := batch[27].Hash
	batch[27].Hash = batch[3].Hash // chunk 27's bytes under chunk 3's address
	if _, err := ingestSpool(ctx, w, dir, batch); err == nil || !strings.Contains(err.Error(), "does not match its address") ||
		!strings.Contains(err.Error(), batch[3].Hash) {
		t.Fatalf("a batch with one forged chunk: %v", err)
	}
	if missing, err := s.MissingChunks(ctx, hashes); err != nil || len(missing) != len(hashes) {
		t.Fatalf("%d of the forged batch's %d chunks were stored (%v)", len(hashes)-len(missing), len(hashes), err)
	}
	batch[27].Hash = forged
	if _, err := ingestSpool(ctx, w, dir, batch); err != nil {
		t.Fatalf("the true batch: %v", err)
	}
	if missing, err := s.MissingChunks(ctx, hashes); err != nil || len(missing) != 0 {
		t.Fatalf("the true batch left %d chunks out (%v)", len(missing), err)
	}
}
