// Command carryover is the persistent code-execution server and its command-line client:
// `carryover serve` runs the HTTP/websocket API and UI (the benchmarks are cmd/carryover-bench);
// run, exec, sessions, files, checkpoints and events talk to a running server (cli_*.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// newRoot builds the command tree; every call gives fresh flag state (the tests run it in-process).
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "carryover",
		Short:         "Persistent IPython sessions that survive anything",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), doctorCmd(), backupCmd(), restoreCmd())
	addClientCommands(root)
	return root
}

// execute runs the command line and returns the process exit code: an *exitError's code (1 for a
// Python error, 2 for an API error, a shell command's own code), else 1.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "carryover:", errorText(ee.err))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "carryover:", err)
	return 1
}
