// Package bench is carryover's benchmark table (`make bench`, cmd/carryover-bench): each figure beside
// a peer or the physical floor measured in the same run (raw ZMQ, jupyter_client, Jupyter Server,
// xxh3 of the same bytes, SQLite reads, disk writes). One file per section; Run prints the table.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
)

// benchRow is one line of the `carryover-bench` table: our figure beside the peer measured in the same run.
type benchRow struct {
	Name  string // what is measured, e.g. "1+1 round trip (median)"
	Ours  string // carryover's figure, with unit
	Peer  string // the peer's figure in the same run ("" when there is none)
	Ratio string // ours/peer or a target verdict ("" when none)
	Note  string // bytes written, split of time, target, ...
}

// section is a group of measurements: one file of this package each.
type section struct {
	Name string
	Run  func(ctx context.Context, env *benchEnv) ([]benchRow, error)
}

// sections are the table's sections in the order they run and print: the kernel and the server
// first (the figures the others are read against), the checkpoint engine, capacity and the agent's
// view, the cluster and the stores, the browser last (it needs chromium).
var sections = []section{
	{"kernel", benchKernel},
	{"server", benchServerSection},
	{"notebooks", benchNotebooks},
	{"idempotency", benchIdempotency},
	{"durability", benchDurability},
	{"jupyter front door", benchJupyterSection},
	{"sandbox", benchSandboxSection},
	{"checkpoint", benchCheckpoint},
	{"checkpoint-nested", benchNested},
	{"checkpoint-api", benchCheckpointAPI},
	{"wake", benchWake},
	{"wake-e2e", benchWakeE2E},
	{"figures", benchFigures},
	{"replay", benchReplay},
	{"capacity", benchCapacity},
	{"agent", benchAgent},
	{"cluster", benchClusterSection},
	{"keys", benchKeysSection},
	{"replication", benchReplicationSection},
	{"backup", benchBackup},
	{"portable", benchPortable},
	{"fork fan-out", benchFanout},
	{"templates", benchTemplates},
	{"browser UI: long sessions", benchUILongSessions},
}

// SectionNames are the names of the sections, in their order.
func SectionNames() []string {
	names := make([]string, len(sections))
	for i, s := range sections {
		names[i] = s.Name
	}
	return names
}

// benchEnv is what every section gets: the config and a scratch directory removed afterwards.
type benchEnv struct {
	Cfg     *configs.Config
	Scratch string
	Root    string // the repository's root (web/ holds the UI section's script)
	Quick   bool   // fewer iterations and smaller data: a smoke test of the bench code, not figures
}

// python is the interpreter the sections' own kernels run: the config's kernel.python, else Debian's.
func (e *benchEnv) python() string {
	if e.Cfg != nil && e.Cfg.Kernel.Python != "" {
		return e.Cfg.Kernel.Python
	}
	return "/usr/bin/python3"
}

// bigArray is the length of the sections' large float64 array and its size's label: 1 GiB, or 8 MiB
// in quick mode.
func (e *benchEnv) bigArray() (elems int, label string) {
	if e.Quick {
		return 1 << 20, "8 MiB"
	}
	return 1 << 27, "1 GiB"
}

// Options say what Run measures.
type Options struct {
	Only    string // run only the sections whose name contains this ("" for all)
	Section string // run only the section of exactly this name ("" for all; the smoke test's subtests)
	Quick   bool   // fewer iterations and smaller data (the smoke test's mode; the figures mean little)
	// Config is the servers' config before each section's tweaks; nil: configs.Default().
	Config *configs.Config
	// Scratch is the parent of the run's scratch dir (removed afterwards); "": the system's temp dir.
	Scratch string
	// Log receives each section's wall time (the table goes to the writer Run is given); nil: none.
	Log io.Writer
}

// Result is one section's outcome, for the smoke test.
type Result struct {
	Name string
	Rows int
	Err  error
}

// Run measures the sections opts selects and prints their table to w, flushed after each section.
// A section that fails prints a FAILED row and the run goes on; the results say which did.
func Run(ctx context.Context, w io.Writer, opts Options) ([]Result, error) {
	cfg := opts.Config
	if cfg == nil {
		cfg = configs.Default()
	}
	if opts.Quick {
		c := *cfg
		c.Persistence.PreImport = nil // ~1 s of CPU per pool kernel: quick checks the code, not warm starts
		// Plain kernels (the sandbox section turns the sandbox on itself: it measures it) and a pool
		// of at most one (startBenchSrv clamps the sections' own sizes): quick checks the sections'
		// code, and the sandbox and the pool have tests of their own.
		c.Sandbox.Enabled = false
		c.Pool.Size, c.Pool.MaxSize = 1, 1
		cfg = &c
	}
	dir, err := os.MkdirTemp(opts.Scratch, "carryover-bench-")
	if err != nil {
		return nil, err
	}
	defer removeScratch(dir)
	defer sweepBenchUIDs(dir)
	root, rerr := servertest.ModuleRoot()
	if rerr != nil {
		root = "." // outside a checkout: the UI section says it is skipped
	}
	env := &benchEnv{Cfg: cfg, Scratch: dir, Root: root, Quick: opts.Quick}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tcarryover\tpeer\tratio\tnote")
	var results []Result
	for _, s := range sections {
		if opts.Only != "" && !strings.Contains(s.Name, opts.Only) || opts.Section != "" && s.Name != opts.Section {
			continue
		}
		fmt.Fprintf(tw, "== %s ==\t\t\t\t\n", s.Name)
		start := time.Now()
		rows, err := s.Run(ctx, env)
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Ours, r.Peer, r.Ratio, r.Note)
		}
		if err != nil {
			fmt.Fprintf(tw, "FAILED\t%v\t\t\t\n", err)
		}
		if err := tw.Flush(); err != nil {
			return results, err
		}
		results = append(results, Result{Name: s.Name, Rows: len(rows), Err: err})
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "(%s took %s)\n", s.Name, time.Since(start).Round(time.Millisecond))
		}
	}
	return results, nil
}

// fmtDur prints a duration in ms with sensible precision.
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f s", ms/1000)
	}
}

// ratio formats ours/peer.
func ratio(ours, peer time.Duration) string {
	if peer <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", float64(ours)/float64(peer))
}

// percentile of sorted-in-place durations (p in 0..100).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	idx := int(float64(len(ds)-1) * p / 100)
	return ds[idx]
}
