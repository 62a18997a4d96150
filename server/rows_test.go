package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// The data viewer's endpoint pages, sorts and searches a frame in the live kernel without running a
// turn, and answers its errors in the API's shape: 404 for an unknown variable, 400 for one that is
// not a table or a bad parameter, 409 when the session has no running kernel.
func TestVariableRows(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "rows"})
	r1 := ts.run("rows", "import pandas as pd\ndf = pd.DataFrame({'k': [f'k{i}' for i in range(1000)], 'v': [(i * 37) % 1000 for i in range(1000)]})\nn = 3")
	type page struct {
		TotalRows   int     `json:"total_rows"`
		MatchedRows int     `json:"matched_rows"`
		Index       []int   `json:"index"`
		Rows        [][]any `json:"rows"`
	}
	p := decodeOK[page](t, ts.raw("GET", "/api/sessions/rows/variables/df/rows?offset=990&limit=20", ""), "last page")
	if p.TotalRows != 1000 || len(p.Rows) != 10 || p.Index[0] != 990 {
		t.Fatalf("last page: %+v", p)
	}
	p = decodeOK[page](t, ts.raw("GET", "/api/sessions/rows/variables/df/rows?sort=v&desc=true&limit=2", ""), "sorted")
	if fmt.Sprint(p.Rows) != "[[k27 999] [k54 998]]" {
		t.Fatalf("sorted descending by v: %v", p.Rows)
	}
	p = decodeOK[page](t, ts.raw("GET", "/api/sessions/rows/variables/df/rows?q=K99", ""), "searched")
	if p.MatchedRows != 11 || len(p.Rows) != 11 {
		t.Fatalf("searched k99: %+v", p)
	}
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/api/sessions/rows/variables/nope/rows", 404, "not_found"},
		{"/api/sessions/rows/variables/n/rows", 400, "invalid_request"},
		{"/api/sessions/rows/variables/df/rows?sort=zz", 400, "invalid_request"},
		{"/api/sessions/rows/variables/df/rows?limit=5000", 400, "invalid_request"},
		{"/api/sessions/rows/variables/df/rows?offset=-1", 400, "invalid_request"},
		{"/api/sessions/rows/variables/df/rows?desc=maybe", 400, "invalid_request"},
		{"/api/sessions/rows/variables/__class__/rows", 400, "invalid_request"},
		{"/api/sessions/nosuch/variables/df/rows", 404, "not_found"},
	} {
		r := ts.raw("GET", c.path, "")
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if r.Status != c.status || json.Unmarshal(r.Body, &e) != nil || e.Error.Code != c.code {
			t.Errorf("GET %s: %d %s, want %d %s", c.path, r.Status, r.Body, c.status, c.code)
		}
	}
	// A refusal names the parameter it refuses, and a variable's type in words.
	for path, want := range map[string]string{
		"/api/sessions/rows/variables/df/rows?offset=-1":  `"field":"offset"`,
		"/api/sessions/rows/variables/df/rows?limit=5000": `"field":"limit"`,
		"/api/sessions/rows/variables/n/rows":             `n is of type int, not a DataFrame`,
	} {
		if r := ts.raw("GET", path, ""); !strings.Contains(string(r.Body), want) {
			t.Errorf("GET %s: %s, want it to say %s", path, r.Body, want)
		}
	}
	if r2 := ts.run("rows", "1"); r2.ExecutionCount != r1.ExecutionCount+1 {
		t.Fatalf("execution count %d after %d: the viewer ran a turn", r2.ExecutionCount, r1.ExecutionCount)
	}
	rowsDuringCell(t, ts)
	if _, err := ts.c.Hibernate(ts.ctx(), "rows"); err != nil {
		t.Fatal(err)
	}
	if r := ts.raw("GET", "/api/sessions/rows/variables/df/rows", ""); r.Status != 409 {
		t.Fatalf("a sleeping session: %d %s, want 409", r.Status, r.Body)
	}
}

// rowsDuringCell: a page asked for while a cell is ending waits for it (the session's lock is
// also held for moments after a cell: its checkpoint, a variables probe), and one asked for while
// a cell runs on answers 409 in the API's shape once the short wait is over.
func rowsDuringCell(t *testing.T, ts *testServer) {
	t.Helper()
	cell := func(code, marker string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := ts.c.Run(ts.ctx(), "rows", client.RunRequest{Code: "open('" + marker + "', 'w').close()\n" + code})
			done <- err
		}()
		for i := 0; ; i++ { // the cell holds the session once its marker is written
			if _, err := ts.c.GetFile(ts.ctx(), "rows", marker); err == nil {
				return done
			}
			if i == 600 {
				t.Fatalf("the cell writing %s did not start", marker)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	done := cell("import time; time.sleep(0.2)", "short-started")
	if r := ts.raw("GET", "/api/sessions/rows/variables/df/rows?limit=1", ""); r.Status != 200 {
		t.Errorf("a page asked for as a cell ends: %d %s, want 200 once it is done", r.Status, r.Body)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done = cell("import time; time.sleep(6)", "long-started")
	r := ts.raw("GET", "/api/sessions/rows/variables/df/rows?limit=1", "")
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if r.Status != 409 || json.Unmarshal(r.Body, &e) != nil || e.Error.Code != "conflict" {
		t.Errorf("a page asked for while a cell runs: %d %s, want 409 conflict", r.Status, r.Body)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
