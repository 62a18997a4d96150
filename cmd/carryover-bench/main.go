// Command carryover-bench prints carryover's benchmark table: each figure beside a peer or the
// physical floor measured in the same run. `make bench` runs it; the harness is internal/bench (its
// smoke test runs every section in quick mode under `make test`); it is not part of the shipped server.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/internal/bench"
)

func main() {
	var opts bench.Options
	cmd := &cobra.Command{
		Use:   "carryover-bench",
		Short: "Measure carryover beside raw ZMQ, jupyter_client and Jupyter Server in one run",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Log = os.Stderr
			_, err := bench.Run(cmd.Context(), os.Stdout, opts)
			return err
		},
	}
	cmd.Flags().StringVar(&opts.Only, "only", "", "run only sections whose name contains this")
	cmd.Flags().BoolVar(&opts.Quick, "quick", false, "fewer iterations and smaller data (a smoke test; the figures mean little)")
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "carryover-bench:", err)
		os.Exit(1)
	}
}
