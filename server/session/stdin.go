package session

import (
	"context"
	"strings"
	"sync"

	"github.com/carryover/carryover/kernel"
)

// inputEOF is the input_reply that makes the kernel's input() raise EOFError (ipykernel's
// convention, a terminal's Ctrl-D).
const inputEOF = "\x04"

// stdinLines answers a run's input() calls from the text of its request's "stdin", a line per
// call, as when a file is piped into a Python program: the last line counts without its newline,
// and past the end input() raises EOFError. Without it POST /run has nobody to ask, and the
// kernel's input() raised ipykernel's StdinNotImplementedError.
type stdinLines struct {
	mu   sync.Mutex
	rest string
	eof  bool
}

// stdinOf is the lines of a request's stdin; nil without one.
func stdinOf(text *string) *stdinLines {
	if text == nil {
		return nil
	}
	return &stdinLines{rest: *text, eof: *text == ""}
}

// next is the next line, without its "\n" (or "\r\n"), or inputEOF past the end.
func (s *stdinLines) next() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eof {
		return inputEOF
	}
	line, rest, found := strings.Cut(s.rest, "\n")
	s.rest = rest
	s.eof = !found || rest == ""
	return strings.TrimSuffix(line, "\r")
}

// answer is the kernel's OnInput for a run with stdin: the next line. The prompt is not put into
// the run's stdout: it comes on the stdin channel, apart from the iopub stream the outputs come
// on, so it could not be placed among them in order (ipykernel flushes stdout before it asks, but
// the two sockets keep no order between them), and this runs on a goroutine of its own.
func (s *stdinLines) answer(_ context.Context, _ kernel.InputRequest) (string, error) {
	return s.next(), nil
}
