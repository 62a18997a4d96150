package persistence_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

const widgetCells = `
import ipywidgets as widgets
from ipywidgets import interact
@interact(n=(0, 20))
def square(n=5):
    print("n =", n)
seen = []
s = widgets.IntSlider(3, description="s")
def on_s(change):
    seen.append(change["new"])
s.observe(on_s, names="value")
d = widgets.Dropdown(options=["a", "b"], value="b")
box = [s, widgets.Text("hi")]
`

// moveWidget sends what a page sends when the user moves a widget: a comm_msg setting value
// (ipywidgets 6's "backbone" sync), on the shell channel, in line with the cells after it.
func moveWidget(t *testing.T, k *kernel.Kernel, commID string, value int) {
	t.Helper()
	hdr, _ := json.Marshal(map[string]string{"msg_id": fmt.Sprintf("move-%d-%d", value, time.Now().UnixNano()),
		"msg_type": "comm_msg", "username": "test", "session": "widget-test", "version": "5.3"})
	content, _ := json.Marshal(map[string]any{"comm_id": commID,
		"data": map[string]any{"method": "backbone", "sync_data": map[string]any{"value": value}}})
	if err := k.SendRaw(context.Background(), "shell", kernel.RawMessage{Header: hdr, Content: content}); err != nil {
		t.Fatal(err)
	}
}

// widgetOutputs is what the kernel keeps of the Output widget of interact function fn.
func widgetOutputs(t *testing.T, k *kernel.Kernel, fn string) string {
	t.Helper()
	return eval(t, k, `"".join(o.get("text", "") for o in __import__("sys").modules["carryover_agent.widgetstate"]._outputs(`+
		fn+`.widget.out.model_id) or ())`)
}

// unquote is a repr'd model id (hex) as a string.
func unquote(t *testing.T, s string) string {
	t.Helper()
	if len(s) < 3 || s[0] != '\'' || s[len(s)-1] != '\'' {
		t.Fatalf("not a quoted id: %s", s)
	}
	return s[1 : len(s)-1]
}

// TestWidgetsComeBack: an interact slider moved to 13 (as a page moves it), a slider with an
// observer and a Dropdown are saved with the checkpoint: the function holding the interact widget
// is no longer skipped ("cannot pickle '_hashlib.HMAC'"), and after kill -9 a new kernel has the
// same models (same ids) at their values, interact's output "n = 13", and callbacks that run again
// when the page moves a widget. The agent's "widgets" op lists them children first for the page.
func TestWidgetsComeBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "wid")
	k := agentKernel(t, c, ws, spool)
	turn := 0
	next := func(k *kernel.Kernel, code string) *carryover.CheckpointResult {
		turn++
		return figureTurn(t, c, k, "wid", turn, code)
	}
	first := next(k, widgetCells)
	if len(first.Skipped) != 0 {
		t.Fatalf("the widgets' turn skipped %+v", first.Skipped)
	}
	slider := unquote(t, eval(t, k, "square.widget.children[0].model_id"))
	moveWidget(t, k, slider, 13)
	cp := next(k, "x = 1")
	at13 := cp.ID
	if len(cp.Skipped) != 0 {
		t.Fatalf("a later turn skipped %+v", cp.Skipped)
	}
	if got := widgetOutputs(t, k, "square"); got != "'n = 13\\n'" {
		t.Fatalf("the live Output widget holds %s", got)
	}
	killKernel(t, k)

	k2 := agentKernel(t, c, ws, spool)
	res, err := c.Restore(ctx, k2, "wid", "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 0 {
		t.Fatalf("restore failed %+v", res.Failed)
	}
	probe := `(square.widget.children[0].value, square.widget.children[0].model_id, s.value, d.value, ` +
		`tuple(d.options), box[0] is s, box[1].value, type(square.widget).__name__)`
	want := fmt.Sprintf("(13, '%s', 3, 'b', ('a', 'b'), True, 'hi', 'interactive')", slider)
	if got := strings.Join(strings.Fields(eval(t, k2, probe)), " "); got != want {
		t.Fatalf("restored widgets %s, want %s", got, want)
	}
	if got := widgetOutputs(t, k2, "square"); got != "'n = 13\\n'" {
		t.Fatalf("the restored Output widget holds %s", got)
	}
	moveWidget(t, k2, slider, 14)
	moveWidget(t, k2, unquote(t, eval(t, k2, "s.model_id")), 7)
	if got := widgetOutputs(t, k2, "square"); got != "'n = 14\\n'" {
		t.Fatalf("interact's callback after the restore: its Output holds %s", got)
	}
	if got := eval(t, k2, "seen"); got != "[7]" {
		t.Fatalf("the observer after the restore saw %s", got)
	}
	var page struct {
		Models []struct {
			CommID  string           `json:"comm_id"`
			Data    map[string]any   `json:"data"`
			Outputs []map[string]any `json:"outputs"`
		} `json:"models"`
	}
	if err := persistence.CallAgent(ctx, k2, "widgets", map[string]any{}, &page); err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	for i, m := range page.Models {
		at[m.CommID] = i
	}
	i, ok := at[slider]
	if !ok || page.Models[i].Data["value"] != float64(14) {
		t.Fatalf("the widgets op has no slider at 14: %+v", page.Models)
	}
	for _, m := range page.Models {
		chs, _ := m.Data["children"].([]any)
		for _, ch := range chs {
			if j := at[strings.TrimPrefix(ch.(string), "IPY_MODEL_")]; j > at[m.CommID] {
				t.Fatalf("child %v comes after its box %s", ch, m.CommID)
			}
		}
	}
	// A checkpoint restored into the kernel that has the widgets puts their saved values back in place.
	if _, err := c.Restore(ctx, k2, "wid", at13, "", false); err != nil {
		t.Fatal(err)
	}
	if got := eval(t, k2, "(square.widget.children[0].value, s.value, square.widget.children[0].model_id)"); got != fmt.Sprintf("(13, 3, '%s')", slider) {
		t.Fatalf("after a restore in place: %s", got)
	}
	cp = next(k2, "y = 2")
	if slices.ContainsFunc(cp.Skipped, func(s carryover.VarSkip) bool { return s.Name == "square" }) {
		t.Fatalf("after the restore the checkpoint skipped %+v", cp.Skipped)
	}
	// An observer that cannot be saved (it holds a generator) is named once, not at every turn.
	cp = next(k2, `s.observe((lambda g: (lambda ch: next(g, None)))(i for i in range(3)), names="value")`)
	named := func(cp *carryover.CheckpointResult) bool {
		return slices.ContainsFunc(cp.Skipped, func(s carryover.VarSkip) bool {
			return s.Name == "@ipywidgets" && strings.Contains(s.Reason, "observer")
		})
	}
	if !named(cp) {
		t.Fatalf("an observer that cannot be saved was not named: %+v", cp.Skipped)
	}
	if cp = next(k2, "z = 3"); named(cp) || len(cp.Skipped) != 0 {
		t.Fatalf("the next turn named it again: %+v", cp.Skipped)
	}
}
