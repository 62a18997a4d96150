package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

type varsAnswer struct {
	Variables []struct {
		Name   string `json:"name"`
		Type   string `json:"type"`
		Shape  []int  `json:"shape"`
		Length *int   `json:"length"`
		Bytes  *int64 `json:"bytes"`
		State  string `json:"state"`
		Reason string `json:"reason"`
	} `json:"variables"`
	Live         bool   `json:"live"`
	CheckpointID string `json:"checkpoint_id"`
	Note         string `json:"note"`
}

type ckptAnswer struct {
	Checkpoint struct {
		ID        string `json:"id"`
		Turn      int    `json:"turn"`
		Variables []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Kind  string `json:"kind"`
			Ref   string `json:"ref"`
			Bytes int64  `json:"bytes"`
		} `json:"variables"`
		Skipped []client.VarSkip `json:"skipped"`
		Files   []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
			Ref  string `json:"ref"`
		} `json:"files"`
	} `json:"checkpoint"`
}

func decodeOK[T any](t *testing.T, r rawResp, what string) T {
	t.Helper()
	var v T
	if r.Status != 200 {
		t.Fatalf("%s: status %d: %s", what, r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("%s: %v: %s", what, err, r.Body)
	}
	return v
}

// The variable inspector reads the idle kernel (type, shape, length, size in memory) and marks each
// name saved or skipped by the latest checkpoint, without moving the execution count; with no kernel
// it answers from the checkpoint. GET /checkpoints/{cid} gives sizes and content references that
// change exactly when a value does (the UI's checkpoint diff).
func TestVariablesAndCheckpointDetail(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "vi"})
	r1 := ts.run("vi", "import numpy as np\nx = [1, 2, 3]\narr = np.zeros((2, 5))\nkeep = 'same'\ng = (i for i in range(3))\nopen('a.txt', 'w').write('one')")
	byName := func(v varsAnswer) map[string]int {
		m := map[string]int{}
		for i, x := range v.Variables {
			m[x.Name] = i
		}
		return m
	}
	var v varsAnswer
	for range 3 {
		v = decodeOK[varsAnswer](t, ts.raw("GET", "/api/sessions/vi/variables", ""), "variables")
	}
	if !v.Live || v.CheckpointID != r1.Checkpoint.ID {
		t.Fatalf("variables: %s", dump(v))
	}
	m := byName(v)
	if _, ok := m["np"]; ok {
		t.Errorf("modules are listed: %s", dump(v))
	}
	x, arr, g := v.Variables[m["x"]], v.Variables[m["arr"]], v.Variables[m["g"]]
	if x.Type != "list" || x.Length == nil || *x.Length != 3 || x.State != "saved" || x.Bytes == nil {
		t.Errorf("x: %s", dump(x))
	}
	if arr.Type != "numpy.ndarray" || len(arr.Shape) != 2 || arr.Shape[0] != 2 || arr.Shape[1] != 5 || arr.Bytes == nil || *arr.Bytes != 80 {
		t.Errorf("arr: %s", dump(arr))
	}
	if g.State != "skipped" || !strings.Contains(g.Reason, "generator") {
		t.Errorf("g: %s", dump(g))
	}
	// three reads ran no turn: the next run's count follows the first
	r2 := ts.run("vi", "x.append(4)\nopen('a.txt', 'w').write('two!')")
	if r2.ExecutionCount != r1.ExecutionCount+1 {
		t.Fatalf("execution count %d after %d: the inspector ran a turn", r2.ExecutionCount, r1.ExecutionCount)
	}

	d1 := decodeOK[ckptAnswer](t, ts.raw("GET", "/api/sessions/vi/checkpoints/"+r1.Checkpoint.ID, ""), "checkpoint 1").Checkpoint
	d2 := decodeOK[ckptAnswer](t, ts.raw("GET", "/api/sessions/vi/checkpoints/"+r2.Checkpoint.ID, ""), "checkpoint 2").Checkpoint
	ref := func(name string, vs []struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Kind  string `json:"kind"`
		Ref   string `json:"ref"`
		Bytes int64  `json:"bytes"`
	}) (string, int64) {
		for _, v := range vs {
			if v.Name == name {
				return v.Ref, v.Bytes
			}
		}
		t.Fatalf("no %s in %s", name, dump(vs))
		return "", 0
	}
	x1, xb := ref("x", d1.Variables)
	x2, _ := ref("x", d2.Variables)
	k1, _ := ref("keep", d1.Variables)
	k2, _ := ref("keep", d2.Variables)
	a1, ab := ref("arr", d1.Variables)
	if x1 == x2 || k1 != k2 || xb <= 0 || ab < 80 || a1 == "" {
		t.Errorf("refs/sizes: x %q->%q (%d B), keep %q->%q, arr %d B", x1, x2, xb, k1, k2, ab)
	}
	if len(d1.Skipped) == 0 || d1.Skipped[0].Name != "g" {
		t.Errorf("skipped: %s", dump(d1.Skipped))
	}
	if len(d1.Files) != 1 || d1.Files[0].Path != "a.txt" || d1.Files[0].Size != 3 || d2.Files[0].Size != 4 || d1.Files[0].Ref == d2.Files[0].Ref {
		t.Errorf("files: %s then %s", dump(d1.Files), dump(d2.Files))
	}
	errCode(t, ts.raw("GET", "/api/sessions/vi/checkpoints/nope", "").err(), 404, "not_found")
	errCode(t, ts.raw("GET", "/api/sessions/nope/variables", "").err(), 404, "not_found")

	// after a server restart there is no kernel: the answer comes from the checkpoint, none is started
	ts = ts.restart()
	v = decodeOK[varsAnswer](t, ts.raw("GET", "/api/sessions/vi/variables", ""), "variables without a kernel")
	m = byName(v)
	if v.Live || v.Note == "" || v.Variables[m["x"]].State != "saved" || v.Variables[m["x"]].Type != "list" || v.Variables[m["g"]].State != "skipped" {
		t.Fatalf("variables without a kernel: %s", dump(v))
	}
	if s := ts.session("vi"); s.Sandbox.Status == "live" {
		t.Errorf("reading the variables started a kernel: %s", dump(s.Sandbox))
	}
}
