package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

// lifecycleActions are the session actions the CLI offers as `sessions <action> ID`: the API's
// POST /api/sessions/{id}/<action>. Without them a terminal user stuck with a runaway cell in
// another terminal, or a kernel to restart, had to reach for curl.
var lifecycleActions = []struct {
	name, done, short string
	reason            bool // takes --reason
}{
	{"interrupt", "interrupted", "Interrupt the session's running cell or shell command (KeyboardInterrupt; a command is killed)", false},
	{"restart", "restarted", "Replace the session's kernel with a fresh one restored from its last checkpoint", false},
	{"pause", "paused", "Pause the session: runs and commands are refused until resume", false},
	{"resume", "resumed", "Resume a paused session", false},
	{"hibernate", "hibernated", "Checkpoint the session and stop its kernel now; the next run wakes it", false},
	{"stop", "stopped", "Complete the session after a final checkpoint", true},
	{"cancel", "cancelled", "End the session at once (cancelled)", true},
}

// lifecycleCmds are the `sessions interrupt|restart|pause|resume|hibernate|stop|cancel ID` commands.
func (c *cli) lifecycleCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, a := range lifecycleActions {
		var reason string
		cmd := &cobra.Command{
			Use: a.name + " ID", Short: a.short, Args: cobra.ExactArgs(1),
			RunE: runE(func(cmd *cobra.Command, args []string) error {
				var body any
				if reason != "" {
					body = map[string]string{"reason": reason}
				}
				var out struct {
					Session client.Session `json:"session"`
				}
				if err := c.call(cmd, http.MethodPost, apiPath(args[0], a.name), body, &out); err != nil || c.json {
					return err
				}
				s := &out.Session
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s: state %s, sandbox %s\n", a.done, args[0], s.State, s.Sandbox.Status)
				return nil
			}),
		}
		if a.reason {
			cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the session (stop_reason) and its event")
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}
