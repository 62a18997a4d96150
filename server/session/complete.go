package session

// complete.go: code completion (the UI's Tab) against the live kernel, bounded in time and size.

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// completeTimeout bounds a completion request: the kernel sends no reply to some requests (a cursor
// it cannot place), and Tab must never hang.
const completeTimeout = 10 * time.Second

// Complete asks the kernel for completions (the UI's Tab). cursor counts characters (unicode code
// points) of code, as Jupyter's protocol does.
func (ls *Session) Complete(ctx context.Context, code string, cursor int) (*kernel.CompleteReply, error) {
	if n := utf8.RuneCountInString(code); cursor < 0 || cursor > n {
		return nil, carryover.Errorf(carryover.CodeInvalid, "cursor_pos must be between 0 and %d (the length of code)", n).WithDetails("field", "cursor_pos")
	}
	k := ls.currentKernel()
	if k == nil {
		return &kernel.CompleteReply{Matches: []string{}, CursorStart: cursor, CursorEnd: cursor}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	sub, off := completeWindowOf(code, cursor)
	rep, err := k.Complete(ctx, sub, cursor-off)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, carryover.Wrap(carryover.CodeTimeout, err, "the kernel did not answer the completion request within %s", completeTimeout)
	}
	if rep != nil {
		rep.CursorStart += off
		rep.CursorEnd += off
	}
	return rep, err
}

// completeWindow bounds the code around the cursor a completion request sends, in code points
// each side: the kernel (jedi) took over 10 s on a 100 KiB identifier, and its shell channel, busy
// with it, held up every later request of the session (found by the API fuzz).
const completeWindow = 4096

// completeWindowOf is the part of code sent for a completion at cursor: at most completeWindow
// code points before the cursor (from a line start when one is in reach) and after it, and the
// offset of its start in code.
func completeWindowOf(code string, cursor int) (string, int) {
	if utf8.RuneCountInString(code) <= 2*completeWindow {
		return code, 0
	}
	runes := []rune(code)
	off := max(0, cursor-completeWindow)
	if off > 0 {
		for i := off; i < cursor; i++ {
			if runes[i] == '\n' {
				off = i + 1
				break
			}
		}
	}
	end := min(len(runes), cursor+completeWindow)
	return string(runes[off:end]), off
}
