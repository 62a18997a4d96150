// Command carryover-bench prints carryover's benchmark table: each figure beside a peer or the
// physical floor measured in the same run (raw ZMQ, jupyter_client, Jupyter Server, xxh3 of the same
// bytes, SQLite reads, disk writes). `make bench` runs it; it is not part of the shipped server.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := benchCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "carryover-bench:", err)
		os.Exit(1)
	}
}
