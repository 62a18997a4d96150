package server_test

import (
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestRunStdin: a POST /run's "stdin" answers the cell's input() a line at a time, then EOFError; without it input() raises StdinNotImplementedError
// (POST /run has nobody to ask), as it did before.
func TestRunStdin(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "stdin"})
	text := "alice\r\nbob\n\nlast"
	code := "lines = []\nwhile True:\n    try:\n        lines.append(input('> '))\n    except EOFError:\n        break\nlines"
	r, err := ts.c.Run(ts.ctx(), "stdin", client.RunRequest{Code: code, Stdin: &text})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "ok" || resultOf(r) != "['alice', 'bob', '', 'last']" || r.Stdout != "" {
		t.Fatalf("stdin lines: %s", dump(r))
	}
	empty := ""
	r, err = ts.c.Run(ts.ctx(), "stdin", client.RunRequest{Code: "input()", Stdin: &empty})
	if err != nil || r.Error == nil || r.Error.EName != "EOFError" {
		t.Fatalf("empty stdin: %s %v", dump(r), err)
	}
	r, err = ts.c.Run(ts.ctx(), "stdin", client.RunRequest{Code: "input('name? ')"})
	if err != nil || r.Error == nil || r.Error.EName != "StdinNotImplementedError" || strings.Contains(r.Stdout, "name?") {
		t.Fatalf("no stdin: %s %v", dump(r), err)
	}
	// POST /api/execute takes it too.
	r, err = ts.c.Execute(ts.ctx(), client.ExecuteRequest{Code: "input('? ') + input()", Stdin: &text})
	if err != nil || resultOf(r) != "'alicebob'" || r.Stdout != "" {
		t.Fatalf("execute with stdin: %s %v", dump(r), err)
	}
	// The session's state holds what the lines made.
	if out := ts.run("stdin", "len(lines)"); resultOf(out) != "4" {
		t.Fatalf("after: %s", dump(out))
	}
}
