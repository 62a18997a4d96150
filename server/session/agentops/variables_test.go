package agentops

import (
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
)

// ListOf marks each name against the latest checkpoint (saved, skipped with its reason, or
// unsaved), sorted by name; without a live list it answers the checkpoint's names, imports left out.
func TestListOf(t *testing.T) {
	cp := &persistence.CheckpointDetail{ID: "ckpt_1",
		Variables: []persistence.VariableDetail{{Name: "df", Type: "DataFrame", Kind: "data"}, {Name: "np", Type: "module", Kind: "imp"}},
		Skipped:   []carryover.VarSkip{{Name: "gen", Type: "generator", Reason: "cannot pickle"}}}
	live := []VariableInfo{{Name: "x", Type: "int"}, {Name: "df", Type: "DataFrame"}, {Name: "gen", Type: "generator"}}
	got := ListOf(live, "", cp)
	want := map[string]string{"df": "saved", "gen": "skipped", "x": "unsaved"}
	if !got.Live || got.CheckpointID != "ckpt_1" || len(got.Variables) != 3 || got.Variables[0].Name != "df" || got.Variables[2].Name != "x" {
		t.Fatalf("live list = %+v", got)
	}
	for _, v := range got.Variables {
		if v.State != want[v.Name] || (v.Name == "gen") != (v.Reason == "cannot pickle") {
			t.Errorf("%s: state %q reason %q", v.Name, v.State, v.Reason)
		}
	}
	got = ListOf(nil, "the kernel is busy", cp)
	if got.Live || got.Note != "the kernel is busy" || len(got.Variables) != 2 || got.Variables[0].Name != "df" ||
		got.Variables[0].State != "saved" || got.Variables[1].State != "skipped" {
		t.Fatalf("from the checkpoint = %+v", got)
	}
	got = ListOf(nil, "no kernel", nil)
	if got.Live || got.CheckpointID != "" || got.Variables == nil || len(got.Variables) != 0 {
		t.Fatalf("with nothing = %+v", got)
	}
}
