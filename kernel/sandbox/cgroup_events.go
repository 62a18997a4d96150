package sandbox

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Events counts limit hits of a box since it was created.
type Events struct {
	OOMKills int64 // processes killed by the OOM killer for the memory limit
	PidsMax  int64 // forks refused for the process limit
}

// eventFiles holds a group's limit-hit counter files open and reads them from offset 0 (a cgroup
// file's content is made anew at each read from the start). The watch of each live kernel reads them
// every watchEvery: opening, reading and closing each file every time was 45% of an idle node's
// server CPU (20 idle sandboxed sessions: 440 of 970 ms over 20 s).
type eventFiles struct {
	mu     sync.Mutex
	opened bool     // tried (a file the host lacks stays nil)
	closed bool     // the group is being removed: no reopening
	oom    *os.File // memory.events (v2) or memory.oom_control (v1): "oom_kill N"
	pids   *os.File // pids.events: "max N"
	buf    [512]byte
}

func (g *cgroup) events() Events {
	f := &g.ev
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.opened && !f.closed {
		f.open(g)
	}
	return Events{OOMKills: f.read(f.oom, "oom_kill"), PidsMax: f.read(f.pids, "max")}
}

// open opens the group's counter files (called with f.mu held).
func (f *eventFiles) open(g *cgroup) {
	f.opened = true
	if d, ok := g.dir("memory"); ok {
		name := "memory.oom_control"
		if g.root.v2 {
			name = "memory.events"
		}
		f.oom, _ = os.Open(filepath.Join(d, name))
	}
	if d, ok := g.dir("pids"); ok {
		f.pids, _ = os.Open(filepath.Join(d, "pids.events"))
	}
}

// read answers the value of key in file's "key value" lines (0 when absent or unreadable; called
// with f.mu held).
func (f *eventFiles) read(file *os.File, key string) int64 {
	if file == nil {
		return 0
	}
	n, err := file.ReadAt(f.buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0
	}
	return keyedValue(f.buf[:n], key)
}

// close closes the files for good (the group is being removed); later reads answer 0, as reads of
// a removed group's files did.
func (f *eventFiles) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, file := range []*os.File{f.oom, f.pids} {
		if file != nil {
			file.Close()
		}
	}
	f.oom, f.pids = nil, nil
}

// keyedValue is the value of key in "key value" lines (0 when absent).
func keyedValue(b []byte, key string) int64 {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if k, v, ok := bytes.Cut(line, []byte(" ")); ok && string(k) == key {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}
