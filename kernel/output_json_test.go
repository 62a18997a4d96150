package kernel

import (
	"encoding/json"
	"testing"
)

// TestOutputJSONKeepsRequiredFields: each output type keeps the fields openapi.json's Output
// requires, also when empty (a KeyboardInterrupt's evalue is ""), and no field twice.
func TestOutputJSONKeepsRequiredFields(t *testing.T) {
	cases := []struct {
		out  Output
		want string
	}{
		{Output{Type: "error", EName: "KeyboardInterrupt", Traceback: []string{"tb"}}, `{"type":"error","traceback":["tb"],"ename":"KeyboardInterrupt","evalue":""}`},
		{Output{Type: "stream", Name: "stdout"}, `{"type":"stream","name":"stdout","text":""}`},
		{Output{Type: "display_data"}, `{"type":"display_data","data":{}}`},
		{Output{Type: "execute_result", ExecutionCount: 3}, `{"type":"execute_result","execution_count":3,"data":{}}`},
		{Output{Type: "execute_result", Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"2"`)}, ExecutionCount: 1}, `{"type":"execute_result","execution_count":1,"data":{"text/plain":"2"}}`},
		{Output{Type: "clear_output"}, `{"type":"clear_output"}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.out)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s: got %s, want %s", c.out.Type, b, c.want)
		}
		var back Output
		if err := json.Unmarshal(b, &back); err != nil || back.Type != c.out.Type || back.EName != c.out.EName {
			t.Errorf("%s: %s does not read back: %v %+v", c.out.Type, b, err, back)
		}
	}
	// Pointers and slices marshal the same way.
	b, _ := json.Marshal([]*Output{{Type: "error", EName: "E"}})
	if string(b) != `[{"type":"error","ename":"E","evalue":""}]` {
		t.Errorf("slice of pointers: %s", b)
	}
}
