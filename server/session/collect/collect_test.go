package collect

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carryover/carryover/kernel"
)

// TestCollectorMergesStreams: consecutive chunks of one stream are one output, as notebooks show
// them; another stream, or any other output, starts a new one; the answer's stdout is every chunk.
func TestCollectorMergesStreams(t *testing.T) {
	c := &Collector{Max: 1 << 20}
	out := func(name, text string) kernel.Output { return kernel.Output{Type: "stream", Name: name, Text: text} }
	for _, o := range []kernel.Output{out("stdout", "a"), out("stdout", "b"), out("stderr", "c"), out("stdout", "d"),
		{Type: "display_data"}, out("stdout", "e"), out("stdout", "f")} {
		c.Add(o)
	}
	res := c.Finish()
	want := []string{"stdout:ab", "stderr:c", "stdout:d", "display_data:", "stdout:ef"}
	if len(res.Outputs) != len(want) {
		t.Fatalf("outputs = %+v", res.Outputs)
	}
	for i, o := range res.Outputs {
		got := o.Name + ":" + o.Text
		if o.Type != "stream" {
			got = o.Type + ":"
		}
		if got != want[i] {
			t.Errorf("output %d = %q, want %q", i, got, want[i])
		}
	}
	if res.Stdout != "abdef" || res.Stderr != "c" {
		t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func TestCollectorCapsAndMerges(t *testing.T) {
	c := &Collector{Max: 11}
	text := func(name, s string) kernel.Output { return kernel.Output{Type: "stream", Name: name, Text: s} }
	for _, o := range []kernel.Output{text("stdout", "abc"), text("stdout", "def"), text("stderr", "!"),
		{Type: "execute_result", Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"42"`)}},
		text("stdout", "over the cap"),
		{Type: "error", EName: "E", EValue: "v", Traceback: []string{"tb"}}} {
		c.Add(o)
	}
	res := c.Finish()
	if res.Stdout != "abcdef" || !strings.HasPrefix(res.Stderr, "!\n[carryover: 12 bytes of output dropped") {
		t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if res.Result == nil || *res.Result != "42" || res.Error == nil || res.Error.EName != "E" {
		t.Errorf("result %v error %+v: an error is kept past the cap", res.Result, res.Error)
	}
	if res.Dropped != 12 || len(res.Outputs) != 5 || res.Outputs[0].Text != "abcdef" {
		t.Errorf("dropped %d, outputs %+v", res.Dropped, res.Outputs)
	}
	if last := res.Outputs[len(res.Outputs)-1]; last.Name != "stderr" || !strings.Contains(last.Text, "dropped") {
		t.Errorf("the notice is not the last output: %+v", last)
	}
}
