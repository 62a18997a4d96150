// Package shellcmd is a shell command of POST .../exec: its request and answer, its argv, its text as the
// history shows it, its output kept up to a cap, and its run through the provisioner (run.go).
package shellcmd

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/carryover/carryover"
)

// Argv turns the exec request's command field (JSON: a string, or a list of strings) into an argv;
// a string runs through /bin/sh -c.
func Argv(command any) ([]string, error) {
	switch c := command.(type) {
	case string:
		if c == "" {
			return nil, carryover.Errorf(carryover.CodeInvalid, "command must not be empty").WithDetails("field", "command")
		}
		return []string{"/bin/sh", "-c", c}, nil
	case []any:
		if len(c) == 0 {
			return nil, carryover.Errorf(carryover.CodeInvalid, "command must not be empty").WithDetails("field", "command")
		}
		out := make([]string, len(c))
		for i, x := range c {
			s, ok := x.(string)
			if !ok {
				return nil, carryover.Errorf(carryover.CodeInvalid, "command must be a string or a list of strings").WithDetails("field", "command")
			}
			out[i] = s
		}
		return out, nil
	default:
		return nil, carryover.Errorf(carryover.CodeInvalid, "command must be a string or a list of strings").WithDetails("field", "command")
	}
}

// Text is the command as the user gave it: the string, or the argv shell-quoted.
func Text(cmd any, argv []string) string {
	if s, ok := cmd.(string); ok {
		return s
	}
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			parts[i] = a
		} else {
			parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(parts, " ")
}

// Buffer is a command's stdout or stderr: it keeps the first Max bytes and counts the rest.
type Buffer struct {
	Max int64

	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int64
}

// Write keeps what fits under Max and claims all of p, so the command never sees a short write.
func (c *Buffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.Max - int64(c.buf.Len())
	if room >= int64(len(p)) {
		c.buf.Write(p)
	} else {
		if room > 0 {
			c.buf.Write(p[:room])
		}
		c.dropped += int64(len(p)) - max(room, 0)
	}
	return len(p), nil
}

// Text is what was kept, with a note of what was dropped.
func (c *Buffer) Text() string {
	if c.dropped > 0 {
		return c.buf.String() + fmt.Sprintf("\n[carryover: %d bytes dropped over run.max_output_bytes]\n", c.dropped)
	}
	return c.buf.String()
}

// Binary is a copy of the bytes kept when they are not UTF-8 (Text's string cannot carry them),
// else nil.
func (c *Buffer) Binary() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if utf8.Valid(c.buf.Bytes()) {
		return nil
	}
	return bytes.Clone(c.buf.Bytes())
}

// Dropped is the count of bytes past Max.
func (c *Buffer) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}
