package main

import (
	"fmt"
	"net/http"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

// usageCmd is `carryover sessions usage ID`: GET /api/sessions/{id}/usage, what the session has
// used over every kernel it had.
func (c *cli) usageCmd() *cobra.Command {
	return &cobra.Command{
		Use: "usage ID", Short: "Show what a session has used: CPU seconds, memory peak, stored bytes", Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var out struct {
				Usage client.Usage `json:"usage"`
			}
			if err := c.call(cmd, http.MethodGet, apiPath(args[0], "usage"), nil, &out); err != nil || c.json {
				return err
			}
			u := out.Usage
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "cpu:\t%.2f s\n", u.CPUSeconds)
			fmt.Fprintf(tw, "memory peak:\t%s\n", mib(u.MemoryPeakBytes))
			fmt.Fprintf(tw, "memory now:\t%s (sandbox %s)\n", mib(u.MemoryBytes), u.Sandbox)
			fmt.Fprintf(tw, "memory GiB-hours:\t%.4f\n", u.MemoryGiBHours)
			fmt.Fprintf(tw, "stored:\t%s in %d checkpoints\n", mib(u.StoredBytes), u.Checkpoints)
			return tw.Flush()
		}),
	}
}

// mib prints bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
