package kernel

import (
	"io"
	"os"
	"strings"
)

// logTail returns the last lines (at most ~2 KiB) of the kernel log, for error messages.
func logTail(path string) string {
	const max = 2048
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := fi.Size() - max
	if off < 0 {
		off = 0
	}
	b, err := io.ReadAll(io.NewSectionReader(f, off, max))
	if err != nil {
		return ""
	}
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:] // drop the partial first line
		}
	}
	return strings.TrimRight(s, "\n")
}
