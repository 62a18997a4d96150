package nbformat

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/carryover/carryover"
)

// outputsJSON is the cell's outputs as JSON, for comparing with a literal.
func outputsJSON(t *testing.T, c Cell) string {
	t.Helper()
	b, err := json.Marshal(c.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestShellCells(t *testing.T) {
	for _, tc := range []struct {
		code, result, source, outputs string
	}{
		{"ls -l", `{"stdout":"a\n","stderr":"b\n","exit_code":0}`, "!ls -l",
			`[{"name":"stdout","output_type":"stream","text":"a\n"},{"name":"stderr","output_type":"stream","text":"b\n"}]`},
		{"cd x\nls", `{"stdout":"","stderr":""}`, "%%bash\ncd x\nls", `[]`},
		{"true", `not json`, "!true", `[]`},
	} {
		c := CellOf(carryover.Execution{ID: 7, Kind: "exec", Code: tc.code, Status: "ok", Result: json.RawMessage(tc.result)})
		if c.ID != "carryover-7" || c.CellType != "code" || c.Source != tc.source || c.ExecutionCount != nil {
			t.Errorf("%q: cell %+v", tc.code, c)
		}
		if got := outputsJSON(t, c); got != tc.outputs {
			t.Errorf("%q: outputs %s, want %s", tc.code, got, tc.outputs)
		}
		md, _ := c.Metadata["carryover"].(map[string]any)
		if md["kind"] != "exec" || md["status"] != "ok" {
			t.Errorf("%q: metadata %v", tc.code, c.Metadata)
		}
	}
}

func TestRunCells(t *testing.T) {
	for _, tc := range []struct {
		name    string
		count   int // the record's execution_count
		result  string
		want    int // the cell's execution_count
		outputs string
	}{
		{"streams merge per name", 3, `{"execution_count":3,"outputs":[
			{"type":"stream","name":"stdout","text":"a"},{"type":"stream","name":"stdout","text":"b"},
			{"type":"stream","name":"stderr","text":"e"},{"type":"stream","name":"stdout","text":"c"}]}`, 3,
			`[{"name":"stdout","output_type":"stream","text":"ab"},{"name":"stderr","output_type":"stream","text":"e"},{"name":"stdout","output_type":"stream","text":"c"}]`},
		{"result takes the cell's count", 0, `{"execution_count":5,"outputs":[{"type":"execute_result","data":{"text/plain":"2"}}]}`, 5,
			`[{"data":{"text/plain":"2"},"execution_count":5,"metadata":{},"output_type":"execute_result"}]`},
		{"clear_output", 1, `{"execution_count":1,"outputs":[{"type":"stream","name":"stdout","text":"old"},{"type":"clear_output"},{"type":"stream","name":"stdout","text":"new"}]}`, 1,
			`[{"name":"stdout","output_type":"stream","text":"new"}]`},
		{"clear_output wait clears at the next output", 1, `{"execution_count":1,"outputs":[{"type":"stream","name":"stdout","text":"old"},{"type":"clear_output","wait":true},{"type":"display_data","data":{"text/plain":"x"}}]}`, 1,
			`[{"data":{"text/plain":"x"},"metadata":{},"output_type":"display_data"}]`},
		{"display updated in place", 1, `{"execution_count":1,"outputs":[
			{"type":"display_data","data":{"text/plain":"0%"},"transient":{"display_id":"p"}},
			{"type":"update_display_data","data":{"text/plain":"100%"},"transient":{"display_id":"p"}}]}`, 1,
			`[{"data":{"text/plain":"100%"},"metadata":{},"output_type":"display_data"}]`},
		{"error output kept once", 1, `{"execution_count":1,"outputs":[{"type":"error","ename":"E","evalue":"v","traceback":["t"]}],"error":{"ename":"E","evalue":"v","traceback":["t"]}}`, 1,
			`[{"ename":"E","evalue":"v","output_type":"error","traceback":["t"]}]`},
		{"run error without output (timeout)", 1, `{"execution_count":1,"outputs":[],"error":{"ename":"Timeout","evalue":"v"}}`, 1,
			`[{"ename":"Timeout","evalue":"v","output_type":"error","traceback":[]}]`},
		{"unreadable answer", 4, `{`, 4, `[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := CellOf(carryover.Execution{ID: 1, Kind: "run", Code: "x", ExecutionCount: tc.count, Result: json.RawMessage(tc.result)})
			if c.Source != "x" || c.ExecutionCount == nil || *c.ExecutionCount != tc.want {
				t.Fatalf("source %q count %v, want %d", c.Source, c.ExecutionCount, tc.want)
			}
			if got := outputsJSON(t, c); got != tc.outputs {
				t.Fatalf("outputs\n got %s\nwant %s", got, tc.outputs)
			}
		})
	}
}

func TestFromHistory(t *testing.T) {
	b, err := FromHistory("s1", []carryover.Execution{{ID: 1, Kind: "run", Code: "1", ExecutionCount: 1, Result: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	var nb struct {
		NBFormat      int `json:"nbformat"`
		NBFormatMinor int `json:"nbformat_minor"`
		Metadata      struct {
			Carryover struct {
				SessionID string `json:"session_id"`
			} `json:"carryover"`
		} `json:"metadata"`
		Cells []Cell `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatal(err)
	}
	if nb.NBFormat != 4 || nb.NBFormatMinor != 5 || nb.Metadata.Carryover.SessionID != "s1" || len(nb.Cells) != 1 {
		t.Fatalf("notebook = %s", b)
	}
	if b, _ := FromHistory("s", nil); !json.Valid(b) || string(b) == "" {
		t.Fatal("an empty history is not a notebook")
	}
}

func TestCodeCells(t *testing.T) {
	got, err := CodeCells([]byte(`{"nbformat":4,"cells":[
		{"cell_type":"markdown","source":"# t"},
		{"cell_type":"code","source":"a = 1\n"},
		{"cell_type":"code","source":["b = 2\n","c = 3"]},
		{"cell_type":"code","source":"  \n"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Source{{1, "a = 1\n"}, {2, "b = 2\nc = 3"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CodeCells = %+v, want %+v", got, want)
	}
	for _, bad := range []string{`nope`, `{"nbformat":3,"cells":[]}`, `{"nbformat":4,"cells":[{"cell_type":"code","source":7}]}`} {
		if _, err := CodeCells([]byte(bad)); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("CodeCells(%s) = %v, want invalid_request", bad, err)
		}
	}
	// A field of the wrong type is named in JSON's words, not as Go's struct type.
	_, err = CodeCells([]byte(`{"nbformat":4,"cells":"x"}`))
	if e := carryover.ErrorOf(err); e.Message != `not a notebook: field "cells" must be an array, not string` || e.Details["field"] != "cells" {
		t.Errorf("cells a string: %v %v", err, e.Details)
	}
}
