package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuMeter splits a round's CPU time by phase and by process tree: a server with its kernels
// (descendants), the S3 gateway, PostgreSQL. The portable rows' time on a loaded 2-core machine is
// mostly CPU, so where it goes says which lever is left.
type cpuMeter struct {
	names []string
	pids  []int
	last  []int64
	parts []string
}

func newCPUMeter(names []string, pids []int) *cpuMeter {
	m := &cpuMeter{names: names, pids: pids}
	m.last = m.read()
	return m
}

// mark closes a phase: the CPU each tree spent since the last mark.
func (m *cpuMeter) mark(phase string) {
	now := m.read()
	var f []string
	for i, n := range m.names {
		f = append(f, fmt.Sprintf("%s %.2f s", n, float64(now[i]-m.last[i])/100))
	}
	m.parts = append(m.parts, phase+" ("+strings.Join(f, ", ")+")")
	m.last = now
}

func (m *cpuMeter) String() string { return "CPU by phase: " + strings.Join(m.parts, "; ") }

// read is each tree's CPU ticks (user + system, its own and its reaped children's, at 100 Hz).
func (m *cpuMeter) read() []int64 {
	ticks, parent := procTable()
	out := make([]int64, len(m.pids))
	for i, root := range m.pids {
		for pid, t := range ticks {
			for p := pid; p > 1; p = parent[p] {
				if p == root {
					out[i] += t
					break
				}
			}
		}
	}
	return out
}

// procTable is every process's CPU ticks and parent.
func procTable() (ticks map[int]int64, parent map[int]int) {
	ticks, parent = map[int]int64{}, map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
		if len(f) < 15 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		var t int64
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			t += v
		}
		ticks[pid], parent[pid] = t, pp
	}
	return ticks, parent
}
