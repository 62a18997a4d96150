package session

// run_collect.go: the run's answer built from its outputs as they stream, within
// run.max_output_bytes.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/carryover/carryover/kernel"
)

// collector builds the run answer from outputs as they stream, capping what it keeps.
type collector struct {
	max     int64
	kept    int64
	dropped int64
	res     *RunResult
	stdout  strings.Builder
	stderr  strings.Builder
	merging bool            // the last of res.Outputs is a stream whose text is in merged
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

// add records one output; it reports whether it was kept (over the cap it is dropped, counted, and
// the answer says so).
func (c *collector) add(o kernel.Output) bool {
	size := outputSize(o)
	if c.kept+size > c.max && o.Type != "error" {
		c.dropped += size
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
		if n := len(c.res.Outputs); n > 0 && c.merging && c.res.Outputs[n-1].Name == o.Name {
			c.merged.WriteString(o.Text)
			return true
		}
		c.endMerge()
		c.res.Outputs = append(c.res.Outputs, o)
		c.merging = true
		c.merged.WriteString(o.Text)
		return true
	case "execute_result":
		if raw, ok := o.Data["text/plain"]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				c.res.Result = &s
			}
		}
	case "error":
		c.res.Error = &RunError{EName: o.EName, EValue: o.EValue, Traceback: o.Traceback}
	}
	c.endMerge()
	c.res.Outputs = append(c.res.Outputs, o)
	return true
}

// endMerge gives the stream output being merged its text.
func (c *collector) endMerge() {
	if c.merging {
		c.res.Outputs[len(c.res.Outputs)-1].Text = c.merged.String()
		c.merged.Reset()
		c.merging = false
	}
}

func (c *collector) finish() {
	c.endMerge()
	c.res.Stdout, c.res.Stderr = c.stdout.String(), c.stderr.String()
	if c.dropped > 0 {
		c.res.OutputTruncated = c.dropped
		notice := fmt.Sprintf("\n[carryover: %d bytes of output dropped over run.max_output_bytes=%d]\n", c.dropped, c.max)
		c.res.Stderr += notice
		c.res.Outputs = append(c.res.Outputs, kernel.Output{Type: "stream", Name: "stderr", Text: notice})
	}
}
