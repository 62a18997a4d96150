package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/configs"
)

// benchRow is one line of the `carryover-bench` table: our figure beside the peer measured in the same run.
type benchRow struct {
	Name  string // what is measured, e.g. "1+1 round trip (median)"
	Ours  string // carryover's figure, with unit
	Peer  string // the peer's figure in the same run ("" when there is none)
	Ratio string // ours/peer or a target verdict ("" when none)
	Note  string // bytes written, split of time, target, ...
}

// benchSection is a group of measurements registered by a bench_*.go file's init.
type benchSection struct {
	Order int
	Name  string
	Run   func(ctx context.Context, env *benchEnv) ([]benchRow, error)
}

// benchEnv is what every section gets: the config and a scratch directory removed afterwards.
type benchEnv struct {
	Cfg     *configs.Config
	Scratch string
	Quick   bool // fewer iterations (used by tests of the bench code)
}

var benchSections []benchSection

func registerBench(s benchSection) { benchSections = append(benchSections, s) }

func benchCmd() *cobra.Command {
	var only string
	var quick bool
	cmd := &cobra.Command{
		Use:   "carryover-bench",
		Short: "Measure carryover beside raw ZMQ, jupyter_client and Jupyter Server in one run",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := configs.Default()
			dir, err := os.MkdirTemp("", "carryover-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			defer sweepBenchUIDs(dir)
			env := &benchEnv{Cfg: cfg, Scratch: dir, Quick: quick}
			sort.SliceStable(benchSections, func(i, j int) bool { return benchSections[i].Order < benchSections[j].Order })
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "measure\tcarryover\tpeer\tratio\tnote")
			for _, s := range benchSections {
				if only != "" && !strings.Contains(s.Name, only) {
					continue
				}
				fmt.Fprintf(tw, "== %s ==\t\t\t\t\n", s.Name)
				start := time.Now()
				rows, err := s.Run(cmd.Context(), env)
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Ours, r.Peer, r.Ratio, r.Note)
				}
				if err != nil {
					fmt.Fprintf(tw, "FAILED\t%v\t\t\t\n", err)
				}
				tw.Flush()
				fmt.Fprintf(os.Stderr, "(%s took %s)\n", s.Name, time.Since(start).Round(time.Millisecond))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&only, "only", "", "run only sections whose name contains this")
	cmd.Flags().BoolVar(&quick, "quick", false, "fewer iterations")
	return cmd
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
