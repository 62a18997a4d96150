// Package nbformat converts between a session's history and Jupyter's notebook format (nbformat
// 4.5): a session's recorded runs and shell commands become a notebook's code cells, and a notebook's
// code cells become sources to run. It knows the history only as recorded (carryover.Execution and
// the JSON of its answer, the public API's shape), not the session service.
package nbformat

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// FromHistory is a session's history (every recorded run and shell command, oldest first) as an
// nbformat 4.5 notebook: a run is a code cell with its execution_count and its outputs; a shell
// command is a `!command` code cell (a `%%bash` cell when it spans lines) with its stdout and stderr
// as stream outputs and no execution_count (it never went through the kernel).
func FromHistory(sessionID string, exs []carryover.Execution) ([]byte, error) {
	cells := make([]Cell, 0, len(exs))
	for _, ex := range exs {
		cells = append(cells, CellOf(ex))
	}
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
			"language_info": map[string]any{"name": "python", "file_extension": ".py", "mimetype": "text/x-python"},
			"carryover":     map[string]any{"session_id": sessionID},
		},
		"cells": cells,
	}
	return json.MarshalIndent(nb, "", " ")
}

// Cell is a code cell of nbformat 4.5.
type Cell struct {
	ID             string           `json:"id"`
	CellType       string           `json:"cell_type"`
	Metadata       map[string]any   `json:"metadata"`
	Source         string           `json:"source"`
	ExecutionCount *int             `json:"execution_count"`
	Outputs        []map[string]any `json:"outputs"`
}

// runAnswer is what a cell reads of a run's recorded answer (the /run answer's JSON).
type runAnswer struct {
	ExecutionCount int             `json:"execution_count"`
	Outputs        []kernel.Output `json:"outputs"`
	Error          *runError       `json:"error"`
}

type runError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// shellAnswer is what a cell reads of a shell command's recorded answer (the /exec answer's JSON).
type shellAnswer struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// CellOf converts one recorded execution.
func CellOf(ex carryover.Execution) Cell {
	c := Cell{ID: fmt.Sprintf("carryover-%d", ex.ID), CellType: "code", Metadata: map[string]any{}, Outputs: []map[string]any{}}
	if ex.Status != "" {
		c.Metadata["carryover"] = map[string]any{"kind": ex.Kind, "status": ex.Status, "duration_ms": ex.DurationMS}
	}
	if ex.Kind == "exec" {
		c.Source = "!" + ex.Code
		if strings.Contains(ex.Code, "\n") {
			c.Source = "%%bash\n" + ex.Code
		}
		var res shellAnswer
		if json.Unmarshal(ex.Result, &res) == nil {
			c.Outputs = appendStream(c.Outputs, "stdout", res.Stdout)
			c.Outputs = appendStream(c.Outputs, "stderr", res.Stderr)
		}
		return c
	}
	c.Source = ex.Code
	n := ex.ExecutionCount
	var res runAnswer
	if json.Unmarshal(ex.Result, &res) != nil {
		c.ExecutionCount = &n
		return c
	}
	if res.ExecutionCount > 0 {
		n = res.ExecutionCount
	}
	c.ExecutionCount = &n
	c.Outputs = outputsOf(res, n)
	return c
}

// outputsOf converts a run's outputs to nbformat ones: streams (consecutive ones of a name merged),
// display data and results, errors; display updates and clear_output applied as a notebook front end
// would have.
func outputsOf(res runAnswer, count int) []map[string]any {
	outs := []map[string]any{}
	displays := map[string][]map[string]any{} // display_id -> its outputs
	clearPending := false
	sawError := false
	for _, o := range res.Outputs {
		if o.Type == "clear_output" {
			if o.Wait {
				clearPending = true
			} else {
				outs, displays = []map[string]any{}, map[string][]map[string]any{}
			}
			continue
		}
		if o.Type == "update_display_data" {
			for _, d := range displays[displayID(o)] {
				d["data"], d["metadata"] = orEmpty(o.Data), orEmpty(o.Metadata)
			}
			continue
		}
		if clearPending {
			outs, displays, clearPending = []map[string]any{}, map[string][]map[string]any{}, false
		}
		switch o.Type {
		case "stream":
			outs = appendStream(outs, o.Name, o.Text)
		case "display_data", "execute_result":
			out := map[string]any{"output_type": o.Type, "data": orEmpty(o.Data), "metadata": orEmpty(o.Metadata)}
			if o.Type == "execute_result" {
				ec := o.ExecutionCount
				if ec == 0 {
					ec = count
				}
				out["execution_count"] = ec
			}
			if did := displayID(o); did != "" {
				displays[did] = append(displays[did], out)
			}
			outs = append(outs, out)
		case "error":
			sawError = true
			outs = append(outs, errorOutput(o.EName, o.EValue, o.Traceback))
		}
	}
	if res.Error != nil && !sawError {
		// A timeout or a kernel death: the error is the run's, not an output of the cell.
		outs = append(outs, errorOutput(res.Error.EName, res.Error.EValue, res.Error.Traceback))
	}
	return outs
}

func errorOutput(ename, evalue string, tb []string) map[string]any {
	if tb == nil {
		tb = []string{}
	}
	return map[string]any{"output_type": "error", "ename": ename, "evalue": evalue, "traceback": tb}
}

// appendStream adds text to the last output when it is a stream of the same name, else a new one.
func appendStream(outs []map[string]any, name, text string) []map[string]any {
	if text == "" {
		return outs
	}
	if name != "stderr" {
		name = "stdout"
	}
	if n := len(outs); n > 0 && outs[n-1]["output_type"] == "stream" && outs[n-1]["name"] == name {
		outs[n-1]["text"] = outs[n-1]["text"].(string) + text
		return outs
	}
	return append(outs, map[string]any{"output_type": "stream", "name": name, "text": text})
}

// displayID is the output's transient display_id, "" when it has none.
func displayID(o kernel.Output) string {
	var id string
	if raw, ok := o.Transient["display_id"]; ok {
		_ = json.Unmarshal(raw, &id)
	}
	return id
}

// orEmpty is m, or an empty map for nil: nbformat wants the key's object even when empty.
func orEmpty(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}
