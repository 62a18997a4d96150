package main

import (
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

func (c *cli) checkpointsCmd() *cobra.Command {
	var sid string
	cmd := &cobra.Command{Use: "checkpoints", Short: "List a session's checkpoints and restore one"}
	cmd.PersistentFlags().StringVarP(&sid, "session", "s", "", "session id")
	_ = cmd.MarkPersistentFlagRequired("session")

	ls := &cobra.Command{
		Use: "ls", Short: "List the checkpoints, newest first", Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Checkpoints []client.CheckpointInfo `json:"checkpoints"`
			}
			if err := c.call(cmd, http.MethodGet, apiPath(sid, "checkpoints"), nil, &out); err != nil || c.json {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTURN\tCREATED\tFILES\tBYTES\tVARIABLES")
			for _, cp := range out.Checkpoints {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", cp.ID, cp.Turn, timeText(cp.CreatedAt), cp.Files, cp.Bytes, strings.Join(cp.Variables, " "))
			}
			return tw.Flush()
		}),
	}
	restore := &cobra.Command{
		Use: "restore CHECKPOINT", Short: "Put the session back to a checkpoint (namespace and files)", Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var out struct {
				Restore client.RestoreResult `json:"restore"`
			}
			if err := c.call(cmd, http.MethodPost, apiPath(sid, "checkpoints", args[0], "restore"), nil, &out); err != nil || c.json {
				return err
			}
			r := out.Restore
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s (turn %d): variables [%s], %d files, cwd %s\n",
				r.CheckpointID, r.Turn, strings.Join(r.Restored, ", "), r.Files, r.Cwd)
			if len(r.Failed) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "failed: [%s]\n", varSkips(r.Failed))
			}
			if len(r.Skipped) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "skipped: [%s]\n", varSkips(r.Skipped))
			}
			return nil
		}),
	}
	cmd.AddCommand(ls, restore)
	return cmd
}
