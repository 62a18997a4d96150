package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/carryover/carryover"
)

// xxh3Floor times, in the kernel, xxh3-128 over every byte of the array named name: the cost of
// hashing memory a turn did not write. S2 and S3 sit beside it: far below it means the dirty-page
// tracking found the written pages without reading the rest.
func (b *ckptBench) xxh3Floor(name string) (time.Duration, error) {
	code := "import time as __t, xxhash as __x\n__t0 = __t.perf_counter(); __x.xxh3_128_hexdigest(memoryview(" + name +
		").cast('B')); __bench_floor = __t.perf_counter() - __t0\ndel __t, __x, __t0"
	out, err := b.k.Eval(b.ctx, code, "str(__bench_floor)")
	if err != nil {
		return 0, err
	}
	var s string
	if err := json.Unmarshal([]byte(jsonOfPyStr(out)), &s); err != nil {
		s = out
	}
	sec, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("xxh3 floor answer %q: %w", out, err)
	}
	_ = b.run("del __bench_floor")
	return time.Duration(sec * float64(time.Second)), nil
}

// dirtyNote names how a checkpoint found changes in large buffers ("uffd" or "hash" and why).
func dirtyNote(r *carryover.CheckpointResult) string {
	switch {
	case r.Timings.DirtyMode == "":
		return ""
	case r.Timings.DirtyFallback != "":
		return "dirty pages: " + r.Timings.DirtyMode + " (" + r.Timings.DirtyFallback + ")"
	default:
		return "dirty pages: " + r.Timings.DirtyMode
	}
}

// durableWriteFloor times writing n random bytes to a new file in dir and fsyncing it: the floor of a
// first checkpoint that must store those bytes durably.
func durableWriteFloor(dir string, n int64) (time.Duration, error) {
	path := filepath.Join(dir, "floor.bin")
	defer os.Remove(path)
	t := time.Now()
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := fillRandom(f, n); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	return time.Since(t), f.Close()
}

// resetPeakRSS clears the kernel's peak RSS (VmHWM) so the next reading is the peak of what follows.
func resetPeakRSS(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// peakRSS reads the kernel's VmHWM in bytes (0 when unreadable).
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// lastPeakRSS is the kernel's peak RSS during the last bench checkpoint (ckptNote prints it).
var lastPeakRSS int64
