package agentops

// variables.go: the variable list of GET .../variables, from the kernel when it could answer and
// from the latest checkpoint otherwise, each name marked saved, skipped or unsaved.

import (
	"sort"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
)

// List is the answer of GET /api/sessions/{id}/variables.
type List struct {
	Variables    []VariableInfo `json:"variables"`
	Live         bool           `json:"live"` // read from the running kernel; false: from the latest checkpoint only
	CheckpointID string         `json:"checkpoint_id,omitempty"`
	Note         string         `json:"note,omitempty"` // why the answer is not live
}

// ListOf is the answer from live, the kernel's list (nil when it could not be asked; note says
// why), and cp, the latest checkpoint's detail (nil when there is none): the kernel's names, or the
// checkpoint's when there are none live (types only, imports left out), each with its state against
// the checkpoint, sorted by name.
func ListOf(live []VariableInfo, note string, cp *persistence.CheckpointDetail) *List {
	out := &List{Variables: []VariableInfo{}, Note: note}
	saved := map[string]persistence.VariableDetail{}
	skipped := map[string]carryover.VarSkip{}
	if cp != nil {
		out.CheckpointID = cp.ID
		for _, v := range cp.Variables {
			saved[v.Name] = v
		}
		for _, v := range cp.Skipped {
			skipped[v.Name] = v
		}
	}
	if live != nil {
		out.Live, out.Variables = true, live
	} else {
		for _, v := range saved {
			if v.Kind != "imp" {
				out.Variables = append(out.Variables, VariableInfo{Name: v.Name, Type: v.Type})
			}
		}
		for _, v := range skipped {
			out.Variables = append(out.Variables, VariableInfo{Name: v.Name, Type: v.Type})
		}
	}
	for i := range out.Variables {
		v := &out.Variables[i]
		if sk, ok := skipped[v.Name]; ok {
			v.State, v.Reason = "skipped", sk.Reason
		} else if _, ok := saved[v.Name]; ok {
			v.State = "saved"
		} else {
			v.State = "unsaved"
		}
	}
	sort.Slice(out.Variables, func(i, j int) bool { return out.Variables[i].Name < out.Variables[j].Name })
	return out
}
