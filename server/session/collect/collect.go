// Package collect builds a run's answer from its outputs as they stream from the kernel, within
// run.max_output_bytes: stdout and stderr, the outputs with consecutive chunks of one stream merged
// (as notebooks show them), the result's text and the error. It imports nothing of the session
// service (server/session), whose RunResult takes the Answer.
package collect

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/carryover/carryover/kernel"
)

// Error is the error of a run whose code raised.
type Error struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// Answer is what a run's outputs make of its answer.
type Answer struct {
	Stdout, Stderr string
	Result         *string // the execute_result's text/plain
	Outputs        []kernel.Output
	Error          *Error
	Dropped        int64 // bytes of output over the cap, dropped (the answer's stderr says so)
}

// Collector builds the answer from outputs as they stream, capping what it keeps at Max bytes (an
// error is kept whatever its size).
type Collector struct {
	Max     int64
	kept    int64
	a       Answer
	stdout  strings.Builder
	stderr  strings.Builder
	merging bool            // the last of a.Outputs is a stream whose text is in merged
	merged  strings.Builder // that stream's text so far
}

func outputSize(o kernel.Output) int64 {
	n := int64(len(o.Text)) + int64(len(o.EValue))
	for _, v := range o.Data {
		n += int64(len(v))
	}
	for _, t := range o.Traceback {
		n += int64(len(t))
	}
	return n
}

// Add records one output; it reports whether it was kept (over the cap it is dropped, counted, and
// the answer says so).
func (c *Collector) Add(o kernel.Output) bool {
	size := outputSize(o)
	if c.kept+size > c.Max && o.Type != "error" {
		c.a.Dropped += size
		return false
	}
	c.kept += size
	switch o.Type {
	case "stream":
		if o.Name == "stderr" {
			c.stderr.WriteString(o.Text)
		} else {
			c.stdout.WriteString(o.Text)
		}
		// Merge consecutive chunks of one stream, as notebooks do, in a builder: appending to the
		// output's string copied all of it each time (a cell flushing 5,000 small prints copied
		// ~20 GB, and the CPU it took starved the kernel's reader until the kernel dropped output).
		if n := len(c.a.Outputs); n > 0 && c.merging && c.a.Outputs[n-1].Name == o.Name {
			c.merged.WriteString(o.Text)
			return true
		}
		c.endMerge()
		c.a.Outputs = append(c.a.Outputs, o)
		c.merging = true
		c.merged.WriteString(o.Text)
		return true
	case "execute_result":
		if raw, ok := o.Data["text/plain"]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				c.a.Result = &s
			}
		}
	case "error":
		c.a.Error = &Error{EName: o.EName, EValue: o.EValue, Traceback: o.Traceback}
	}
	c.endMerge()
	c.a.Outputs = append(c.a.Outputs, o)
	return true
}

// endMerge gives the stream output being merged its text.
func (c *Collector) endMerge() {
	if c.merging {
		c.a.Outputs[len(c.a.Outputs)-1].Text = c.merged.String()
		c.merged.Reset()
		c.merging = false
	}
}

// Finish is the answer once the outputs are all in (Outputs never nil); a drop over the cap is told
// at the end of stderr and as the last output.
func (c *Collector) Finish() Answer {
	c.endMerge()
	a := c.a
	if a.Outputs == nil {
		a.Outputs = []kernel.Output{}
	}
	a.Stdout, a.Stderr = c.stdout.String(), c.stderr.String()
	if a.Dropped > 0 {
		notice := fmt.Sprintf("\n[carryover: %d bytes of output dropped over run.max_output_bytes=%d]\n", a.Dropped, c.Max)
		a.Stderr += notice
		a.Outputs = append(a.Outputs, kernel.Output{Type: "stream", Name: "stderr", Text: notice})
	}
	return a
}
