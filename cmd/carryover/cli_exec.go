package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

func (c *cli) execCmd() *cobra.Command {
	var sid, shell, cwd string
	var timeout float64
	cmd := &cobra.Command{
		Use:   "exec -s SESSION [--cwd DIR] (-c 'shell command' | -- CMD ARGS...)",
		Short: "Run a shell command in a session's sandbox; exits with its exit code",
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			req := client.ExecRequest{WorkingDir: cwd}
			switch {
			case cmd.Flags().Changed("command") && len(args) > 0:
				return errors.New("give the command with -c or after --, not both")
			case cmd.Flags().Changed("command"):
				req.Command = shell
			case len(args) > 0:
				req.Command = args
			default:
				return errors.New("no command: give -c 'shell command' or -- CMD ARGS...")
			}
			if timeout != 0 { // a negative one is sent: the server refuses it (it ran with the default)
				req.TimeoutSeconds = client.Seconds(timeout)
			}
			var res client.ExecResult
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			defer c.interruptOnCtrlC(cmd, sid, cancel)()
			cmd.SetContext(ctx)
			err := c.call(cmd, http.MethodPost, apiPath(sid, "exec"), req, &res)
			var ae *client.Error
			if errors.As(err, &ae) && ae.Result != nil { // a timeout: its partial answer
				var part client.ExecResult
				if c.json {
					printJSON(cmd.OutOrStdout(), ae.Result)
				} else if json.Unmarshal(ae.Result, &part) == nil {
					printExec(cmd, &part)
				}
			}
			if err != nil {
				return err
			}
			if !c.json {
				printExec(cmd, &res)
			}
			if res.Interrupted { // as a shell's Ctrl-C
				return &exitError{code: 130}
			}
			if res.ExitCode != 0 {
				return &exitError{code: res.ExitCode}
			}
			return nil
		}),
	}
	sessionFlag(cmd, &sid)
	cmd.Flags().StringVarP(&shell, "command", "c", "", "a shell string, run under /bin/sh -c")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (default: the session's)")
	cmd.Flags().Float64Var(&timeout, "timeout", 0, "timeout in seconds (0: the server's default)")
	return cmd
}

// interruptOnCtrlC makes Ctrl-C interrupt the session, which kills the command (its answer then
// comes back, and the exit code is 130); a second one gives up waiting (cancel). The function it
// returns ends the watch.
func (c *cli) interruptOnCtrlC(cmd *cobra.Command, sid string, cancel context.CancelFunc) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt)
	done := make(chan struct{})
	ctx := context.WithoutCancel(cmd.Context())
	go func() {
		defer signal.Stop(sigs)
		for n := 1; ; n++ {
			select {
			case <-sigs:
				if n > 1 {
					cancel()
					return
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "carryover: interrupting the command (Ctrl-C again to stop waiting)")
				if err := c.client().Do(ctx, http.MethodPost, apiPath(sid, "interrupt"), nil, nil); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "carryover: interrupt:", err)
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

func printExec(cmd *cobra.Command, res *client.ExecResult) {
	// the exact bytes when the output is not text: `carryover exec ... 'cat a.png' > a.png` works
	if res.StdoutBase64 != nil {
		_, _ = cmd.OutOrStdout().Write(res.StdoutBase64)
	} else {
		_, _ = io.WriteString(cmd.OutOrStdout(), res.Stdout)
	}
	if res.StderrBase64 != nil {
		_, _ = cmd.ErrOrStderr().Write(res.StderrBase64)
	} else {
		_, _ = io.WriteString(cmd.ErrOrStderr(), res.Stderr)
	}
	if res.StdoutDroppedBytes > 0 || res.StderrDroppedBytes > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "carryover: output dropped: %d bytes of stdout, %d of stderr\n", res.StdoutDroppedBytes, res.StderrDroppedBytes)
	}
	if res.TimedOut {
		fmt.Fprintln(cmd.ErrOrStderr(), "carryover: the command timed out")
	}
}
