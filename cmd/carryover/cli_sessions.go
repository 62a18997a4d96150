package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

func (c *cli) sessionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "List, show, fork, export, import and remove sessions; interrupt, restart, pause, resume, hibernate, stop them; show what one used"}
	ls := &cobra.Command{
		Use: "ls", Short: "List the sessions (id, state, sandbox status, execution count, updated)",
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Sessions []client.Session `json:"sessions"`
			}
			if err := c.call(cmd, http.MethodGet, "/api/sessions", nil, &out); err != nil || c.json {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tSANDBOX\tEXECUTIONS\tUPDATED")
			for _, s := range out.Sessions {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.ID, s.State, s.Sandbox.Status, s.ExecutionCount, timeText(s.UpdatedAt))
			}
			return tw.Flush()
		}),
	}
	show := &cobra.Command{
		Use: "show ID", Short: "Show one session", Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var out struct {
				Session client.Session `json:"session"`
			}
			if err := c.call(cmd, http.MethodGet, apiPath(args[0]), nil, &out); err != nil || c.json {
				return err
			}
			printSession(cmd, &out.Session)
			return nil
		}),
	}
	rm := &cobra.Command{
		Use: "rm ID...", Short: "Delete sessions (kernel, checkpoints and files)", Args: cobra.MinimumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := c.client().DeleteSession(cmd.Context(), id); err != nil {
					return err
				}
				if !c.json {
					fmt.Fprintln(cmd.OutOrStdout(), "deleted", id)
				}
			}
			return nil
		}),
	}
	cmd.AddCommand(ls, show, rm, c.forkCmd(), c.notebookCmd(), c.usageCmd(), c.exportCmd(), c.importCmd())
	cmd.AddCommand(c.lifecycleCmds()...) // cli_lifecycle.go
	return cmd
}

// forkCmd branches a session: new ones with its namespace and files, sharing its stored data.
func (c *cli) forkCmd() *cobra.Command {
	var req client.ForkRequest
	fork := &cobra.Command{
		Use: "fork ID [--to NEW_ID] [--checkpoint CID] [--count N]", Short: "Branch a session: new ones with its state (or a checkpoint's)",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var out struct {
				Sessions []client.Session `json:"sessions"`
			}
			var body any = req
			if cmd.Flags().Changed("count") && req.Count == 0 {
				// sent as given, for the server's 400: the request's omitempty would make it one fork
				body = map[string]any{"session_id": req.SessionID, "checkpoint_id": req.CheckpointID, "count": 0}
			}
			if err := c.call(cmd, http.MethodPost, apiPath(args[0], "fork"), body, &out); err != nil || c.json {
				return err
			}
			for _, s := range out.Sessions {
				fmt.Fprintf(cmd.OutOrStdout(), "forked %s -> %s\n", args[0], s.ID)
			}
			return nil
		}),
	}
	fork.Flags().StringVar(&req.SessionID, "to", "", "the new session's id (generated when empty); with --count above 1, the children are NEW_ID-1 .. NEW_ID-N")
	fork.Flags().StringVar(&req.CheckpointID, "checkpoint", "", "fork this checkpoint (default: the session's current state)")
	fork.Flags().IntVar(&req.Count, "count", 0, "how many children (1..100, default 1), all or none")
	return fork
}

// notebookCmd writes the session's history as an .ipynb notebook.
func (c *cli) notebookCmd() *cobra.Command {
	var outFile string
	nb := &cobra.Command{
		Use: "notebook ID [-o FILE]", Short: "Export the session's history as a Jupyter notebook (.ipynb)",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			data, err := c.client().Notebook(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if outFile == "" || outFile == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := os.WriteFile(outFile, data, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d bytes\n", outFile, len(data))
			return nil
		}),
	}
	nb.Flags().StringVarP(&outFile, "output", "o", "", "write to FILE instead of stdout")
	return nb
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func printSession(cmd *cobra.Command, s *client.Session) {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s:\t"+format+"\n", append([]any{k}, a...)...) }
	row("id", "%s", s.ID)
	if s.Name != "" {
		row("name", "%s", cell(s.Name))
	}
	row("state", "%s", s.State)
	if s.StopReason != "" {
		row("stop reason", "%s", s.StopReason)
	}
	row("sandbox", "%s", strings.TrimSpace(fmt.Sprintf("%s %s", s.Sandbox.Status, s.Sandbox.ID)))
	row("language", "%s", s.Language)
	row("execution count", "%d", s.ExecutionCount)
	b := s.BudgetConsumed
	row("consumed", "%d iterations, %.1fs, %.2f cents (%.2f cpu s)", b.Iterations, b.DurationSeconds, b.CostCents, b.CPUSeconds)
	if cp := s.LastCheckpoint; cp != nil {
		row("last checkpoint", "%s (turn %d, %s)", cp.ID, cp.Turn, timeText(cp.CreatedAt))
	}
	row("working dir", "%s", s.AgentContext.WorkingDir)
	if s.ClientID != "" {
		row("client id", "%s", s.ClientID)
	}
	if s.Tenant != "" {
		row("tenant", "%s", s.Tenant)
	}
	row("created", "%s", timeText(s.CreatedAt))
	row("updated", "%s", timeText(s.UpdatedAt))
	row("last activity", "%s", timeText(s.LastActivity))
	_ = tw.Flush()
}
