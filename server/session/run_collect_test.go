package session

import (
	"testing"

	"github.com/carryover/carryover/kernel"
)

// TestCollectorMergesStreams: consecutive chunks of one stream are one output, as notebooks show
// them; another stream, or any other output, starts a new one; the answer's stdout is every chunk.
func TestCollectorMergesStreams(t *testing.T) {
	res := &RunResult{}
	c := &collector{max: 1 << 20, res: res}
	out := func(name, text string) kernel.Output { return kernel.Output{Type: "stream", Name: name, Text: text} }
	for _, o := range []kernel.Output{out("stdout", "a"), out("stdout", "b"), out("stderr", "c"), out("stdout", "d"),
		{Type: "display_data"}, out("stdout", "e"), out("stdout", "f")} {
		c.add(o)
	}
	c.finish()
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
