// Command carryover is the persistent code-execution server: `carryover serve`
// runs the HTTP/websocket API and UI (the benchmarks are cmd/carryover-bench).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "carryover",
		Short:         "Persistent IPython sessions that survive anything",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "carryover:", err)
		os.Exit(1)
	}
}
