package bench

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
)

// The portable section: a session holding ~100 MB of numpy and pandas state, made on a SQLite
// server, exported to a file and imported into a PostgreSQL + S3 server, then its first run there
// (which restores it), timed end to end. The floor is the same bytes (the archive's chunks,
// decoded) written as a tar through zstd (the codec the project uses, at its level) to a file in
// the same directory and fsynced, then read back and decoded: what moving those bytes through a
// file costs at the least. Each round makes new data in the source (new random arrays), so no
// import finds its chunks already stored, and waits for the importing server's warm pool to hold
// a kernel, as a server in use does.

// portableData makes ~100 MB in the shapes users hold: a 40 MB float array, a 42 MB frame (floats,
// ints, a categorical) and 150,000 JSON-like nested records (dicts of strings, lists and dicts).
const portableData = `import numpy as np, pandas as pd
n = 2_500_000
a = np.random.rand(5_000_000)
df = pd.DataFrame({"x": np.random.rand(n), "k": np.random.randint(0, 1000, n),
                   "city": pd.Categorical(np.random.choice(["Paris", "Lima", "Oslo", "Pune"], n))})
records = [{"id": i, "user": f"user{i}", "tags": ["a", "b", str(i % 7)], "score": float(np.random.rand()),
            "geo": {"lat": i * 1e-3, "lon": -i * 1e-3}, "ok": i % 2 == 0} for i in range(150_000)]`

// portableProbe is the first run after an import: it reads every variable the data made.
const portableProbe = `float(a[0] + df.x.iloc[0]) + records[-1]["geo"]["lat"] + len(df.city.cat.categories)`

func benchPortable(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	src, dst, be, stop, err := portableServers(ctx, env)
	if err != nil {
		return nil, err
	}
	defer stop()
	id, _, err := src.createSession(ctx)
	if err != nil {
		return nil, err
	}
	rounds, data := 5, portableData
	if env.Quick { // ~1 MB, one round: the same code paths
		rounds, data = 1, strings.NewReplacer("n = 2_500_000", "n = 25_000", "rand(5_000_000)", "rand(50_000)",
			"range(150_000)", "range(1_500)").Replace(portableData)
		if data == portableData {
			return nil, errors.New("quick mode: portableData no longer has the sizes it shrinks")
		}
	}
	dir := filepath.Join(env.Scratch, "portable")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	load := loadAverage()
	var ours, floor []time.Duration
	var size, raw int64
	var split string
	var cpu *cpuMeter
	for i := range rounds {
		if _, r, err := src.run(ctx, id, data); err != nil || r.Status != "ok" {
			return nil, fmt.Errorf("making the data: %v %+v", err, r)
		}
		if err := warmPool(ctx, dst); err != nil {
			return nil, err
		}
		stopProfile := func() {}
		if i == rounds-1 {
			if stopProfile, err = startServerProfile("portable", false); err != nil {
				return nil, err
			}
		}
		var mark func(string)
		if i == rounds-1 { // the servers are this process (its kernels its children)
			cpu = newCPUMeter([]string{"both servers+kernels", "gateway", "postgres"}, []int{os.Getpid(), be.gw.PID(), be.pg.PID()})
			mark = cpu.mark
		}
		d, parts, n, err := portableRound(ctx, src, dst, id, filepath.Join(dir, "s.carryover.tar"), fmt.Sprintf("%s-%d", id, i), portableProbe, mark)
		stopProfile()
		if err != nil {
			return nil, err
		}
		fd, rn, err := portableFloor(filepath.Join(dir, "s.carryover.tar"), filepath.Join(dir, "floor.tar.zst"))
		if err != nil {
			return nil, err
		}
		ours, floor, size, raw, split = append(ours, d), append(floor, fd), n, rn, parts
		if err := dst.c.DeleteSession(ctx, fmt.Sprintf("%s-%d", id, i)); err != nil { // its kernel back to the node
			return nil, err
		}
	}
	mo, mf := percentile(ours, 50), percentile(floor, 50)
	gib, err := benchPortableGiB(ctx, env, be, dir)
	if err != nil {
		return nil, fmt.Errorf("the 1 GiB row: %w", err)
	}
	return []benchRow{{
		Name:  fmt.Sprintf("export + import + first run, %s of numpy/pandas state, SQLite -> PostgreSQL + S3 (median)", fmtBytes(raw)),
		Ours:  fmtDur(mo),
		Peer:  "tar+zstd, fsync, read back " + fmtDur(mf),
		Ratio: ratio(mo, mf),
		Note: fmt.Sprintf("goal <= 1 s and <= 1.5x the floor; %d rounds, each of new data (an array, a frame, nested records); archive %s; last round %s, %s; %s; load average %s at its start",
			rounds, fmtBytes(size), split, cpu, src.sandboxNote(), load),
	}, gib}, nil
}

// portableBackends are the PostgreSQL server and the S3 gateway the importing servers store into.
type portableBackends struct {
	pg *pgtest.Server
	gw *s3test.Server
}

// postgresEnv is the configuration, as CARRYOVER_* variables, of a server storing into database db
// of be and into bucket of its gateway.
func (be portableBackends) postgresEnv(db, bucket string) []string {
	return []string{"CARRYOVER_STORE_DRIVER=postgres", "CARRYOVER_STORE_DSN=" + be.pg.DSN(db),
		"CARRYOVER_CHUNKS_S3_ENDPOINT=" + be.gw.Endpoint, "CARRYOVER_CHUNKS_S3_BUCKET=" + bucket,
		"CARRYOVER_CHUNKS_S3_ACCESS_KEY=" + s3test.AccessKey, "CARRYOVER_CHUNKS_S3_SECRET_KEY=" + s3test.SecretKey,
		"CARRYOVER_CHUNKS_S3_PATH_STYLE=true"}
}

// portableServers starts PostgreSQL, an S3 gateway (Versity) and the two servers: src on SQLite,
// dst on PostgreSQL + S3. stop ends them all.
func portableServers(ctx context.Context, env *benchEnv) (src, dst *benchSrv, be portableBackends, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	pg, err := pgtest.Init("")
	if err != nil {
		return nil, nil, be, stop, err
	}
	stops = append(stops, func() { pg.Remove() })
	if err := pg.Start(); err != nil {
		return nil, nil, be, stop, err
	}
	if err := createBenchDB(pg.DSN("postgres"), "portable"); err != nil {
		return nil, nil, be, stop, err
	}
	gw, err := s3test.Start("")
	if err != nil {
		return nil, nil, be, stop, err
	}
	stops = append(stops, gw.Stop)
	be = portableBackends{pg: pg, gw: gw}
	if src, err = startBenchSrv(ctx, env, "portable-src", func(c *configs.Config) { c.Pool.Size = 1 }); err != nil {
		return nil, nil, be, stop, err
	}
	stops = append(stops, func() { src.stop() })
	dst, err = startBenchSrv(ctx, env, "portable-dst", func(c *configs.Config) {
		c.Pool.Size = 1
		c.Store.Driver, c.Store.DSN = "postgres", pg.DSN("portable")
		c.Chunks.S3.Endpoint, c.Chunks.S3.Bucket = gw.Endpoint, "portable"
		c.Chunks.S3.AccessKey, c.Chunks.S3.SecretKey, c.Chunks.S3.PathStyle = s3test.AccessKey, s3test.SecretKey, true
	})
	if err != nil {
		return nil, nil, be, stop, err
	}
	stops = append(stops, func() { dst.stop() })
	return src, dst, be, stop, nil
}

// warmPool waits until h's warm pool holds an idle kernel, so a first run claims one as it would on
// a server in use (the rounds' imports each take one, and the pool refills in the background).
func warmPool(ctx context.Context, h *benchSrv) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := h.c.Status(ctx)
		if err != nil {
			return err
		}
		if st.Pool.Idle > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the importing server's pool has no idle kernel after 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// portableRound exports session id of src to file, imports it into dst as newID and runs probe
// there, timing the three together; it answers the time, its split, and the archive's size.
// mark, when set, is called as each of the three ends (the 1 GiB row's CPU by phase).
func portableRound(ctx context.Context, src, dst *benchSrv, id, file, newID, probe string, mark func(phase string)) (time.Duration, string, int64, error) {
	if mark == nil {
		mark = func(string) {}
	}
	start := time.Now()
	f, err := os.Create(file)
	if err != nil {
		return 0, "", 0, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = src.c.ExportSession(ctx, id, "", bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, "", 0, fmt.Errorf("export: %w", err)
	}
	te := time.Since(start)
	mark("export")
	in, err := os.Open(file)
	if err != nil {
		return 0, "", 0, err
	}
	defer in.Close()
	res, err := dst.c.ImportSession(ctx, bufio.NewReaderSize(in, 1<<20), newID)
	if err != nil {
		return 0, "", 0, fmt.Errorf("import: %w", err)
	}
	ti := time.Since(start) - te
	mark("import")
	_, r, err := dst.run(ctx, newID, probe)
	if err != nil || r.Status != "ok" {
		return 0, "", 0, fmt.Errorf("first run after the import: %v %+v", err, r)
	}
	total := time.Since(start)
	mark("first run")
	fi, err := os.Stat(file)
	if err != nil {
		return 0, "", 0, err
	}
	split := fmt.Sprintf("export %s, import %s (%d chunks, %s written), first run %s%s", fmtDur(te), fmtDur(ti), res.Chunks,
		fmtBytes(res.BytesWritten), fmtDur(total-te-ti), restoreSplit(ctx, dst, newID))
	return total, split, fi.Size(), nil
}

// portableFloor writes the archive's chunks, decoded, as a tar through zstd into out (fsynced) and
// reads them back, decoding; it answers the time and the raw bytes moved.
func portableFloor(archive, out string) (time.Duration, int64, error) {
	chunks, raw, err := decodedChunks(archive)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	f, err := os.Create(out)
	if err != nil {
		return 0, 0, err
	}
	zw, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		f.Close()
		return 0, 0, err
	}
	tw := tar.NewWriter(zw)
	for i, c := range chunks {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprint(i), Size: int64(len(c)), Mode: 0o644}); err != nil {
			return 0, 0, err
		}
		if _, err := tw.Write(c); err != nil {
			return 0, 0, err
		}
	}
	err = errors.Join(tw.Close(), zw.Close(), f.Sync(), f.Close())
	if err != nil {
		return 0, 0, err
	}
	in, err := os.Open(out)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	zr, err := zstd.NewReader(in)
	if err != nil {
		return 0, 0, err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var back int64
	for {
		if _, err := tr.Next(); err == io.EOF {
			break
		} else if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, tr)
		if err != nil {
			return 0, 0, err
		}
		back += n
	}
	if back != raw {
		return 0, 0, fmt.Errorf("the floor read back %d bytes of %d", back, raw)
	}
	return time.Since(start), raw, nil
}

// decodedChunks reads an archive's chunk members, decoded: the bytes the floor moves.
func decodedChunks(archive string) ([][]byte, int64, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return nil, 0, err
	}
	defer dec.Close()
	tr := tar.NewReader(f)
	var out [][]byte
	var raw int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, raw, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if !strings.HasPrefix(h.Name, "carryover/chunks/") {
			continue
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(tr); err != nil {
			return nil, 0, err
		}
		c := b.Bytes()
		if strings.HasSuffix(h.Name, ".zst") {
			if c, err = dec.DecodeAll(c, nil); err != nil {
				return nil, 0, err
			}
		}
		out = append(out, c)
		raw += int64(len(c))
	}
}

// loadAverage is the machine's 1-minute load average ("?" when unreadable): on a shared machine a
// row's figures mean little without it, its ratio to the floor beside it more.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// createBenchDB creates database name on the PostgreSQL server of dsn.
func createBenchDB(dsn, name string) error {
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer admin.Close()
	_, err = admin.Exec(`CREATE DATABASE ` + name)
	return err
}

// restoreSplit is the restore's own split of a first run (its checkpoint_restored event's timings).
func restoreSplit(ctx context.Context, h *benchSrv, id string) string {
	evs, err := h.c.Events(ctx, id, 0, 10, "checkpoint_restored")
	if err != nil || len(evs) == 0 {
		return ""
	}
	var p struct {
		DurationMS float64 `json:"duration_ms"`
		Timings    struct {
			ReadMS    float64 `json:"read_ms"`
			LoadMS    float64 `json:"load_ms"`
			WaitMS    float64 `json:"wait_ms"`
			FilesMS   float64 `json:"files_ms"`
			LazyBytes int64   `json:"lazy_bytes"`
		} `json:"timings"`
	}
	if json.Unmarshal(evs[0].Payload, &p) != nil {
		return ""
	}
	return fmt.Sprintf(" (its restore %.0f ms: read %.0f ms, load %.0f ms of which %.0f ms waiting for chunks, lazy %s)",
		p.DurationMS, p.Timings.ReadMS, p.Timings.LoadMS, p.Timings.WaitMS, fmtBytes(p.Timings.LazyBytes))
}
