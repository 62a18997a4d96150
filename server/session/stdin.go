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

// answer is the kernel's OnInput for a run with stdin: its prompt goes into the run's stdout (as a
// piped program's does: no echo of the line), then the next line answers.
func (s *stdinLines) answer(prompt func(string)) func(context.Context, kernel.InputRequest) (string, error) {
	return func(_ context.Context, req kernel.InputRequest) (string, error) {
		if req.Prompt != "" {
			prompt(req.Prompt)
		}
		return s.next(), nil
	}
}
