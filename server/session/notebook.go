package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// Notebook is the session's history (every recorded run and shell command, oldest first) as an
// nbformat 4.5 notebook: a run is a code cell with its execution_count and its outputs; a shell
// command is a `!command` code cell (a `%%bash` cell when it spans lines) with its stdout and stderr
// as stream outputs and no execution_count (it never went through the kernel).
func (s *Service) Notebook(ctx context.Context, id string) ([]byte, error) {
	if _, err := s.get(id); err != nil {
		return nil, err
	}
	exs, err := s.store.ListExecutions(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	cells := make([]nbCell, 0, len(exs))
	for _, ex := range exs {
		cells = append(cells, notebookCell(ex))
	}
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
			"language_info": map[string]any{"name": "python", "file_extension": ".py", "mimetype": "text/x-python"},
			"carryover":     map[string]any{"session_id": id},
		},
		"cells": cells,
	}
	return json.MarshalIndent(nb, "", " ")
}

// nbCell is a code cell of nbformat 4.5.
type nbCell struct {
	ID             string           `json:"id"`
	CellType       string           `json:"cell_type"`
	Metadata       map[string]any   `json:"metadata"`
	Source         string           `json:"source"`
	ExecutionCount *int             `json:"execution_count"`
	Outputs        []map[string]any `json:"outputs"`
}

// notebookCell converts one recorded execution.
func notebookCell(ex carryover.Execution) nbCell {
	c := nbCell{ID: fmt.Sprintf("carryover-%d", ex.ID), CellType: "code", Metadata: map[string]any{}, Outputs: []map[string]any{}}
	if ex.Status != "" {
		c.Metadata["carryover"] = map[string]any{"kind": ex.Kind, "status": ex.Status, "duration_ms": ex.DurationMS}
	}
	if ex.Kind == "exec" {
		c.Source = "!" + ex.Code
		if strings.Contains(ex.Code, "\n") {
			c.Source = "%%bash\n" + ex.Code
		}
		var res ExecResult
		if json.Unmarshal(ex.Result, &res) == nil {
			c.Outputs = appendStream(c.Outputs, "stdout", res.Stdout)
			c.Outputs = appendStream(c.Outputs, "stderr", res.Stderr)
		}
		return c
	}
	c.Source = ex.Code
	n := ex.ExecutionCount
	var res RunResult
	if json.Unmarshal(ex.Result, &res) != nil {
		c.ExecutionCount = &n
		return c
	}
	if res.ExecutionCount > 0 {
		n = res.ExecutionCount
	}
	c.ExecutionCount = &n
	c.Outputs = notebookOutputs(res, n)
	return c
}

// notebookOutputs converts a run's outputs to nbformat ones: streams (consecutive ones of a name
// merged), display data and results, errors; display updates and clear_output applied as a
// notebook front end would have.
func notebookOutputs(res RunResult, count int) []map[string]any {
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
				d["data"], d["metadata"] = mimeBundle(o.Data), metadataOf(o.Metadata)
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
			out := map[string]any{"output_type": o.Type, "data": mimeBundle(o.Data), "metadata": metadataOf(o.Metadata)}
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

func mimeBundle(d map[string]json.RawMessage) map[string]json.RawMessage {
	if d == nil {
		return map[string]json.RawMessage{}
	}
	return d
}

func metadataOf(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}
