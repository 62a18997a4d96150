package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// The session's history as an nbformat 4.5 notebook: prints, results, errors, plots and shell
// commands, valid for Debian's nbformat.
func TestNotebook(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "nb"})
	ts.run("nb", "print('hello')")
	ts.run("nb", "6 * 7")
	ts.run("nb", "1 / 0")
	ts.run("nb", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
	ts.exec("nb", client.ExecRequest{Command: "echo out; echo err >&2"})

	// The answer's headers, then the typed call.
	req, err := http.NewRequestWithContext(ts.ctx(), "GET", ts.base+"/api/sessions/nb/notebook", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ipynb+json" ||
		resp.Header.Get("Content-Disposition") != "attachment; filename=nb.ipynb" {
		t.Fatalf("notebook answer: %d %v", resp.StatusCode, resp.Header)
	}
	raw := must(t, 200, "notebook", func(ctx context.Context) ([]byte, error) { return ts.c.Notebook(ctx, "nb") })

	var nb struct {
		NBFormat      int `json:"nbformat"`
		NBFormatMinor int `json:"nbformat_minor"`
		Metadata      struct {
			Kernelspec   map[string]any `json:"kernelspec"`
			LanguageInfo map[string]any `json:"language_info"`
		} `json:"metadata"`
		Cells []struct {
			ID             string           `json:"id"`
			CellType       string           `json:"cell_type"`
			Source         string           `json:"source"`
			ExecutionCount *int             `json:"execution_count"`
			Outputs        []map[string]any `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(raw, &nb); err != nil {
		t.Fatalf("notebook JSON: %v\n%s", err, raw)
	}
	if nb.NBFormat != 4 || nb.NBFormatMinor != 5 || nb.Metadata.Kernelspec["name"] != "python3" || nb.Metadata.LanguageInfo["name"] != "python" {
		t.Fatalf("notebook header: %s", raw[:min(len(raw), 400)])
	}
	if len(nb.Cells) != 5 {
		t.Fatalf("%d cells, want 5:\n%s", len(nb.Cells), raw)
	}
	ids := map[string]bool{}
	for i, c := range nb.Cells {
		if c.ID == "" || ids[c.ID] || c.CellType != "code" {
			t.Fatalf("cell %d: id %q type %q", i, c.ID, c.CellType)
		}
		ids[c.ID] = true
		if i < 4 && (c.ExecutionCount == nil || *c.ExecutionCount != i+1) {
			t.Fatalf("cell %d execution_count %v", i, c.ExecutionCount)
		}
	}
	out := func(cell, i int) map[string]any {
		t.Helper()
		if len(nb.Cells[cell].Outputs) <= i {
			t.Fatalf("cell %d has %d outputs: %s", cell, len(nb.Cells[cell].Outputs), dump(nb.Cells[cell]))
		}
		return nb.Cells[cell].Outputs[i]
	}
	if o := out(0, 0); o["output_type"] != "stream" || o["name"] != "stdout" || o["text"] != "hello\n" {
		t.Fatalf("print: %v", o)
	}
	if o := out(1, 0); o["output_type"] != "execute_result" || o["data"].(map[string]any)["text/plain"] != "42" || o["execution_count"] != float64(2) {
		t.Fatalf("result: %v", o)
	}
	if o := out(2, 0); o["output_type"] != "error" || o["ename"] != "ZeroDivisionError" || len(o["traceback"].([]any)) == 0 {
		t.Fatalf("error: %v", o)
	}
	png := false
	for _, o := range nb.Cells[3].Outputs {
		if d, ok := o["data"].(map[string]any); ok && o["output_type"] == "display_data" && d["image/png"] != nil {
			png = true
		}
	}
	if !png {
		t.Fatalf("no image/png display_data in the plot cell: %s", dump(nb.Cells[3].Outputs))
	}
	if c := nb.Cells[4]; c.Source != "!echo out; echo err >&2" || c.ExecutionCount != nil {
		t.Fatalf("exec cell: %s", dump(c))
	}
	if o := out(4, 0); o["name"] != "stdout" || o["text"] != "out\n" {
		t.Fatalf("exec stdout: %v", o)
	}
	if o := out(4, 1); o["name"] != "stderr" || o["text"] != "err\n" {
		t.Fatalf("exec stderr: %v", o)
	}

	const py = "/usr/bin/python3"
	if exec.Command(py, "-c", "import nbformat").Run() != nil {
		t.Log("nbformat is not importable by /usr/bin/python3 (python3-nbformat): validation skipped")
	} else {
		cmd := exec.Command(py, "-c", "import nbformat,sys; nbformat.validate(nbformat.reads(sys.stdin.read(), as_version=4))")
		cmd.Stdin = strings.NewReader(string(raw))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nbformat.validate: %v\n%s", err, b)
		}
	}
	errCode(t, errOf(ts.c.Notebook(ts.ctx(), "nosuch")), 404, "not_found")
}

// TestNotebookRun runs a notebook's code cells into a session: in order, each a turn of its own,
// stopping at the first error unless asked to go on; a round trip through the export keeps the code.
func TestNotebookRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ts.ctx()
	ts.newSession(client.CreateRequest{SessionID: "nbrun"})
	nb := []byte(`{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
		{"cell_type": "markdown", "source": "# title", "metadata": {}},
		{"cell_type": "code", "source": ["a = 20\n", "b = a + 1"], "metadata": {}, "outputs": [], "execution_count": null},
		{"cell_type": "code", "source": "1/0", "metadata": {}, "outputs": [], "execution_count": null},
		{"cell_type": "code", "source": "print(a + b)", "metadata": {}, "outputs": [], "execution_count": null}]}`)
	res, err := ts.c.RunNotebook(ctx, "nbrun", nb, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 2 || res.StoppedAt == nil || *res.StoppedAt != 2 || len(res.Cells) != 2 ||
		res.Cells[0].Index != 1 || res.Cells[1].Result.Status != "error" || res.Cells[1].Result.Error.EName != "ZeroDivisionError" {
		t.Fatalf("stop at the error: %+v", res)
	}
	res, err = ts.c.RunNotebook(ctx, "nbrun", nb, true)
	if err != nil || res.Ran != 3 || res.StoppedAt != nil || res.Cells[2].Result.Stdout != "41\n" {
		t.Fatalf("continue on error: %+v %v", res, err)
	}
	if r := ts.run("nbrun", "print(a, b)"); r.Stdout != "20 21\n" || r.ExecutionCount != 6 {
		t.Errorf("the session after the notebooks: %+v", r)
	}
	for _, bad := range []string{`{"nbformat": 3, "cells": []}`, `{"nbformat": 4, "cells": [{"cell_type": "code", "source": 5}]}`, `[]`} {
		_, err := ts.c.RunNotebook(ctx, "nbrun", []byte(bad), false)
		errCode(t, err, 400, "invalid_request")
	}
	_, err = ts.c.RunNotebook(ctx, "no-such", nb, false)
	errCode(t, err, 404, "not_found")
}

// TestNotebookRefusesAFlagItCannotRead: continue_on_error other than true or false is a 400 naming
// it, and no cell runs (it was read as false: a caller who wrote "yes" or "1" got a run that stopped
// at the first error without a word).
func TestNotebookRefusesAFlagItCannotRead(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "nbflag"})
	nb := `{"nbformat":4,"nbformat_minor":5,"metadata":{},"cells":[{"cell_type":"code","source":"x = 1","metadata":{},"outputs":[],"execution_count":null}]}`
	r := ts.raw("POST", "/api/sessions/nbflag/notebook?continue_on_error=yes", nb)
	var e struct {
		Error apiError `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	if r.Status != 400 || e.Error.Code != "invalid_request" || e.Error.Details["field"] != "continue_on_error" {
		t.Fatalf("continue_on_error=yes: %d %s", r.Status, r.Body)
	}
	if s := ts.session("nbflag"); s.ExecutionCount != 0 {
		t.Fatalf("a cell ran: execution_count %d", s.ExecutionCount)
	}
}
