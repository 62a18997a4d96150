package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The portable section's 1 GiB row: one session holding a 1 GiB array (8 MiB in quick mode),
// exported from a SQLite server and imported into a PostgreSQL + S3 one, then its first run there,
// once. Both servers are processes of their own here, so each one's memory is its own: their RSS is
// sampled every 10 ms through the round and set beside the idle figure each had before it (the
// goal: never above 1.2x idle + 64 MiB; the kernels, which hold the array, are other processes).

// benchPortableGiB runs the row with be's PostgreSQL and gateway, dir for the archive.
func benchPortableGiB(ctx context.Context, env *benchEnv, be portableBackends, dir string) (benchRow, error) {
	n, label := int64(1)<<27, "1 GiB" // float64s
	if env.Quick {
		n, label = 1<<20, "8 MiB"
	}
	if err := createBenchDB(be.pg.DSN("postgres"), "portable_gib"); err != nil {
		return benchRow{}, err
	}
	token := benchRandHex(16)
	sp, sc, err := spawnBenchServer(env, "portable-gib-src", token, "CARRYOVER_POOL_SIZE=1")
	if err != nil {
		return benchRow{}, err
	}
	defer sp.Stop()
	dp, dc, err := spawnBenchServer(env, "portable-gib-dst", token, append(be.postgresEnv("portable_gib", "portable-gib"), "CARRYOVER_POOL_SIZE=1")...)
	if err != nil {
		return benchRow{}, err
	}
	defer dp.Stop()
	src, dst := &benchSrv{c: sc, quick: env.Quick}, &benchSrv{c: dc, quick: env.Quick}
	id, _, err := src.createSession(ctx)
	if err != nil {
		return benchRow{}, err
	}
	if _, r, err := src.run(ctx, id, fmt.Sprintf("import numpy as np\nbig = np.random.rand(%d)", n)); err != nil || r.Status != "ok" {
		return benchRow{}, fmt.Errorf("making the data: %v %+v", err, r)
	}
	if err := warmPool(ctx, dst); err != nil {
		return benchRow{}, err
	}
	time.Sleep(time.Second) // the checkpoint's and the pool's work done: the idle figures
	load := loadAverage()
	mem := sampleRSS(sp.PID(), dp.PID())
	cpu := newCPUMeter([]string{"export server+kernel", "import server+kernel", "gateway", "postgres"},
		[]int{sp.PID(), dp.PID(), be.gw.PID(), be.pg.PID()})
	file := filepath.Join(dir, "gib.carryover.tar")
	d, split, size, err := portableRound(ctx, src, dst, id, file, id+"-gib", "float(big[-1] + big[0])", cpu.mark)
	peaks := mem.stop()
	if err != nil {
		return benchRow{}, err
	}
	fd, _, err := portableFloor(file, filepath.Join(dir, "gib-floor.tar.zst"))
	if err != nil {
		return benchRow{}, err
	}
	os.Remove(file)
	return benchRow{
		Name:  fmt.Sprintf("export + import + first run, a %s array, SQLite -> PostgreSQL + S3 (server processes)", label),
		Ours:  fmtDur(d),
		Peer:  "tar+zstd, fsync, read back " + fmtDur(fd),
		Ratio: ratio(d, fd),
		Note: fmt.Sprintf("goal <= 10 s, each server's RSS <= 1.2x idle + 64 MiB: %s; archive %s; %s; %s; load average %s at its start",
			peaks, fmtBytes(size), split, cpu, load),
	}, nil
}

// rssSampler reads the resident memory of some processes every 10 ms, keeping each one's first
// figure (idle) and its peak.
type rssSampler struct {
	pids       []int
	idle, peak []int64
	done       chan struct{}
	wg         sync.WaitGroup
}

func sampleRSS(pids ...int) *rssSampler {
	s := &rssSampler{pids: pids, idle: make([]int64, len(pids)), peak: make([]int64, len(pids)), done: make(chan struct{})}
	for i, p := range pids {
		s.idle[i] = rssOf(p)
		s.peak[i] = s.idle[i]
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				for i, p := range s.pids {
					s.peak[i] = max(s.peak[i], rssOf(p))
				}
			}
		}
	}()
	return s
}

// stop ends the sampling and says, for the source and the importing server, idle -> peak and
// whether the peak kept within 1.2x idle + 64 MiB.
func (s *rssSampler) stop() string {
	close(s.done)
	s.wg.Wait()
	var parts []string
	for i, name := range []string{"export server", "import server"} {
		bound := s.idle[i] + s.idle[i]/5 + 64<<20
		verdict := "within"
		if s.peak[i] > bound {
			verdict = "OVER"
		}
		parts = append(parts, fmt.Sprintf("%s RSS %s idle -> %s peak (+%s, %s its bound %s)", name,
			fmtBytes(s.idle[i]), fmtBytes(s.peak[i]), fmtBytes(s.peak[i]-s.idle[i]), verdict, fmtBytes(bound)))
	}
	return strings.Join(parts, ", ")
}

// rssOf is a process's resident set (VmRSS) in bytes; 0 when it cannot be read.
func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
