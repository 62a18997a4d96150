package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// Benchmarks of the store's bulk paths. The data set size is CARRYOVER_BENCH_MIB (default 256 MiB;
// the figures in the report use 1024). Run: go test -run '^$' -bench . -benchtime 3x ./persistence/...

func benchMiB() int {
	if n, err := strconv.Atoi(os.Getenv("CARRYOVER_BENCH_MIB")); err == nil && n > 0 {
		return n
	}
	return 256
}

// benchStore fills a store with random 4 MiB raw chunks and returns it with their hashes; the file is
// removed when b ends.
func benchStore(b *testing.B) (*Store, []string) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	buf := make([]byte, 4<<20)
	var hashes []string
	for i := range benchMiB() / 4 {
		fillPseudoRandom(buf, uint64(i))
		c, _ := chunk.Encode(buf, nil)
		if _, err := s.putChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, c.Hash)
	}
	return s, hashes
}

// fillPseudoRandom fills b with incompressible bytes quickly (xorshift), distinct per seed.
func fillPseudoRandom(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := 0; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := range 8 {
			b[i+j] = byte(x >> (8 * j))
		}
	}
}

// BenchmarkChunkReads compares the store's read path with plain SELECT loops over the same blobs:
// ReadChunkTo (prepared lookup by hash, RawBytes, hash check, write to io.Discard), a SELECT into
// []byte (the usual way), and a SELECT into RawBytes (the cheapest database/sql allows).
func BenchmarkChunkReads(b *testing.B) {
	s, hashes := benchStore(b)
	total := int64(len(hashes)) << 22
	ctx := context.Background()
	b.Run("ReadChunkTo", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			for _, h := range hashes {
				if _, err := s.ReadChunkTo(ctx, h, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("ReadChunk", func(b *testing.B) {
		b.SetBytes(total)
		var buf []byte
		for b.Loop() {
			for _, h := range hashes {
				var err error
				if buf, err = s.ReadChunk(ctx, h, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	selectAll := func(b *testing.B, scan func(*sql.Rows) error) {
		b.SetBytes(total)
		for b.Loop() {
			rows, err := s.db.Query(`SELECT data FROM chunks`)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
				if err := scan(rows); err != nil {
					b.Fatal(err)
				}
			}
			rows.Close()
		}
	}
	b.Run("SelectBytesBaseline", func(b *testing.B) {
		selectAll(b, func(r *sql.Rows) error { var d []byte; return r.Scan(&d) })
	})
	b.Run("SelectRawBytes", func(b *testing.B) {
		selectAll(b, func(r *sql.Rows) error { var d sql.RawBytes; return r.Scan(&d) })
	})
}

// BenchmarkPutChunks measures writing new 4 MiB raw chunks (hash check + insert + commit).
func BenchmarkPutChunks(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "w.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, 4<<20)
	b.SetBytes(int64(len(buf)))
	i := uint64(0)
	for b.Loop() {
		b.StopTimer()
		i++
		fillPseudoRandom(buf, i)
		c := rawInput(buf)
		b.StartTimer()
		if _, err := s.putChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutTurnS3 measures the store's part of issue 13's S3 turn: one new 1 MiB chunk and a new
// group descriptor listing it among 1,024 chunks (a 1 GiB array in 1 MiB chunks), in one put.
func BenchmarkPutTurnS3(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "s3.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	kids := putSmallChunks(b, s, "chunk %d", 1023)
	buf := make([]byte, 1<<20)
	i := uint64(0)
	for b.Loop() {
		b.StopTimer()
		i++
		fillPseudoRandom(buf, i)
		c := rawInput(buf)
		d := rawInput([]byte(fmt.Sprintf("descriptor %d", i)), append(append([]string{}, kids...), c.Hash)...)
		b.StartTimer()
		if _, err := s.putChunks(ctx, []carryover.ChunkInput{c, d}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitTurn measures the store's part of a small turn's checkpoint (a `1+1`): one new small
// chunk (the turn's history entry), then the checkpoint committed with 30 roots (the groups of a
// session with a few variables and its history blocks), the session's older checkpoints pruned to
// 20, in one transaction.
func BenchmarkCommitTurn(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "turn.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateSession(ctx, carryover.SessionRecord{ID: "s", State: "running", CreatedAt: dbNow()}); err != nil {
		b.Fatal(err)
	}
	roots := putSmallChunks(b, s, "group %d", 29)
	manifest := []byte(fmt.Sprintf(`{"v":2,"groups":[%s]}`, strings.Repeat(`{"k":"state","n":["@carryover.history.b000000"],"t":["state"],"r":"c0f8110e85c0cfe45ab21c86866c8187"},`, 29)+`{}`))
	i := 0
	for b.Loop() {
		i++
		c := rawInput([]byte(fmt.Sprintf("history entry %d", i)))
		if _, err := s.putChunks(ctx, []carryover.ChunkInput{c}); err != nil {
			b.Fatal(err)
		}
		cp := carryover.Checkpoint{ID: fmt.Sprintf("c%d", i), SessionID: "s", Turn: i, Manifest: manifest,
			CreatedAt: dbNow(), Roots: append(roots[:29:29], c.Hash)}
		if _, err := s.commitPruning(ctx, cp, 20); err != nil {
			b.Fatal(err)
		}
	}
}

// putSmallChunks stores n small chunks (format's text with their index), one put each as turns
// make them, and returns their hashes in order: the set-up a benchmark's descriptor or roots list.
func putSmallChunks(b *testing.B, s *Store, format string, n int) []string {
	hashes := make([]string, 0, n+1)
	for i := range n {
		c := rawInput([]byte(fmt.Sprintf(format, i)))
		if _, err := s.putChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, c.Hash)
	}
	return hashes
}
