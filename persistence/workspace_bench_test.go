package persistence

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/persistence/sqlite"
)

// Benchmark of the workspace snapshot and restore on a SQLite store. The file size is
// CARRYOVER_BENCH_MIB (default 256 MiB; the figures in the report use 1024).
// Run: go test -run '^$' -bench WorkspaceFile -benchtime 3x ./persistence/

func benchMiB() int {
	if n, err := strconv.Atoi(os.Getenv("CARRYOVER_BENCH_MIB")); err == nil && n > 0 {
		return n
	}
	return 256
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

// BenchmarkWorkspaceFile snapshots a fresh file of CARRYOVER_BENCH_MIB and restores it, reporting
// both rates and the bytes an appended MiB costs.
func BenchmarkWorkspaceFile(b *testing.B) {
	ctx := context.Background()
	size := int64(benchMiB()) << 20
	src := b.TempDir()
	p := filepath.Join(src, "big.bin")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4<<20)
	for i := range size / int64(len(buf)) {
		fillPseudoRandom(buf, uint64(i)+1e6)
		f.Write(buf)
	}
	f.Close()
	for b.Loop() {
		b.StopTimer()
		s, err := sqlite.Open(filepath.Join(b.TempDir(), "ws.db"))
		if err != nil {
			b.Fatal(err)
		}
		w, err := s.BeginCheckpoint(ctx)
		if err != nil {
			b.Fatal(err)
		}
		syscall.Sync() // each phase starts with no dirty pages of the previous one
		b.StartTimer()
		t0 := time.Now()
		first, err := SnapshotFiles(ctx, w, src, nil, FileLimits{})
		if err != nil {
			b.Fatal(err)
		}
		snap := time.Since(t0)
		dst := b.TempDir()
		b.StopTimer()
		syscall.Sync()
		b.StartTimer()
		t0 = time.Now()
		if err := RestoreFiles(ctx, s, dst, first.Files, false); err != nil {
			b.Fatal(err)
		}
		restore := time.Since(t0)
		b.StopTimer()
		syscall.Sync()
		// Baseline: write the same bytes to a new file with plain os.File writes.
		t0 = time.Now()
		wf, _ := os.Create(filepath.Join(dst, "baseline.bin"))
		rf, _ := os.Open(p)
		io.CopyBuffer(struct{ io.Writer }{wf}, struct{ io.Reader }{rf}, buf)
		rf.Close()
		wf.Close()
		plain := time.Since(t0)
		syscall.Sync()
		af, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		af.Write(buf[:1<<20])
		af.Close()
		os.Chtimes(p, time.Now(), time.Now())
		t0 = time.Now()
		second, err := SnapshotFiles(ctx, w, src, first.Files, FileLimits{})
		if err != nil {
			b.Fatal(err)
		}
		appendSnap := time.Since(t0)
		os.Truncate(p, size)
		w.Close()
		s.Close()
		b.ReportMetric(float64(size)/snap.Seconds()/(1<<20), "snapshot-MiB/s")
		b.ReportMetric(float64(size)/restore.Seconds()/(1<<20), "restore-MiB/s")
		b.ReportMetric(float64(size)/plain.Seconds()/(1<<20), "plain-copy-MiB/s")
		b.ReportMetric(float64(second.BytesWritten), "append-1MiB-bytes-written")
		b.ReportMetric(appendSnap.Seconds()*1000, "append-snapshot-ms")
		b.StartTimer()
	}
}
