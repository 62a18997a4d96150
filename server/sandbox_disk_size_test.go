package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// TestSandboxDiskSize: sandbox.disk in a create request sizes the session's workspace disk: a
// small one gives ENOSPC past its size while the server's default is much larger, a larger one
// holds more than the default, and one below a kernel's 16Mi memory floor but over the smallest
// disk (8Mi) is made and mounted; a size over sandbox.max_disk, below the smallest disk (saying so)
// or not a size is a 400 naming the field, and no session is made.
func TestSandboxDiskSize(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t, func(c *configs.Config) {
		c.Sandbox.Disk, c.Sandbox.MaxDisk = "64Mi", "160Mi"
		c.Server.MaxBodyBytes = 32 << 20 // an upload past a disk, not past the body limit
	})
	ts.create("small", &client.SandboxRequest{Disk: "24Mi"})
	ts.create("tiny", &client.SandboxRequest{Disk: "12Mi"}) // between the smallest disk (8Mi) and a kernel's memory floor (16Mi)
	s := ts.newSession(client.CreateRequest{SessionID: "big", Start: true, Sandbox: &client.SandboxRequest{Disk: "128Mi"}})
	if s.Sandbox.Disk != "128Mi" {
		t.Errorf("session's disk: %s", dump(s.Sandbox))
	}
	fill := `import os
def fill(name, mb):
    n = 0
    try:
        with open(name, 'wb') as f:
            for _ in range(mb):
                f.write(b'x' * (1 << 20)); f.flush(); os.fsync(f.fileno()); n += 1
        return 'ok'
    except OSError as e:
        return 'errno %d %s' % (e.errno, n < 24)
`
	if out := ts.stdout("small", fill+"print(fill('a.bin', 40))"); out != "errno 28 True" {
		t.Errorf("40 MiB in a 24 MiB workspace: %q, want ENOSPC", out)
	}
	if out := ts.stdout("tiny", fill+"print(fill('a.bin', 4))"); out != "ok" {
		t.Errorf("4 MiB in a 12 MiB workspace: %q", out)
	}
	uploadPastTheDisk(t, ts, "tiny")
	if out := ts.stdout("big", fill+"print(fill('a.bin', 100))"); out != "ok" {
		t.Errorf("100 MiB in a 128 MiB workspace (the default is 64 MiB): %q", out)
	}
	for _, body := range []string{`"1Gi"`, `"1Mi"`, `"lots"`, `"-5Gi"`} {
		r := ts.raw("POST", "/api/sessions", `{"session_id": "refused", "sandbox": {"disk": `+body+`}}`)
		var e struct {
			Error apiError `json:"error"`
		}
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != 400 || e.Error.Code != "invalid_request" || e.Error.Details["field"] != "sandbox.disk" || !strings.Contains(e.Error.Message, "sandbox.disk") {
			t.Errorf("disk %s: %d %s", body, r.Status, r.Body)
		}
		if body == `"1Mi"` && !strings.Contains(e.Error.Message, "below the smallest disk, 8Mi") {
			t.Errorf("disk 1Mi: %q, want it to name the smallest disk", e.Error.Message) // not "want a size like 512Mi"
		}
	}
	errCode(t, errOf(ts.c.GetSession(t.Context(), "refused")), 404, "not_found")
}

// uploadPastTheDisk: a file upload larger than the room left on session id's workspace disk is a
// 413 payload_too_large that says the disk is full and how much room it has (it was a bare 500
// "internal error"), and leaves nothing behind. One of known size is refused before anything is
// written, with the room exact (a file that fits is then written); one sent chunked is refused
// when the disk fills, its part removed.
func uploadPastTheDisk(t *testing.T, ts *testServer, id string) {
	t.Helper()
	e := fullAnswer(t, ts.raw("PUT", "/api/sessions/"+id+"/files/data/big.bin", strings.Repeat("x", 20<<20)))
	free, _ := e.Details["free_bytes"].(float64)
	disk, _ := e.Details["disk_bytes"].(float64)
	if e.Details["size_bytes"] != float64(20<<20) || disk < 8<<20 || disk > 12<<20 || free < 1<<20 || free >= disk {
		t.Errorf("20 MiB into a 12 MiB workspace: %+v", e)
	}
	noneBut(t, ts, id, "a.bin")
	if r := ts.raw("PUT", "/api/sessions/"+id+"/files/data/small.bin", strings.Repeat("y", 1<<20)); r.Status != 201 {
		t.Errorf("1 MiB after the refused upload: %d %s", r.Status, r.Body)
	}
	// chunked: no Content-Length, so the disk's ENOSPC is what refuses it
	req, err := http.NewRequestWithContext(t.Context(), "PUT", ts.base+"/api/sessions/"+id+"/files/data/chunked.bin",
		io.MultiReader(strings.NewReader(strings.Repeat("z", 20<<20))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if e := fullAnswer(t, rawResp{Status: res.StatusCode, Body: body}); e.Details["size_bytes"] != nil {
		t.Errorf("a chunked upload's size is not known: %+v", e)
	}
	noneBut(t, ts, id, "a.bin", "data/small.bin")
}

// apiError is the API's error shape.
type apiError struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// fullAnswer checks r is the 413 of a full workspace disk and returns its error.
func fullAnswer(t *testing.T, r rawResp) apiError {
	t.Helper()
	var e struct {
		Error apiError `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	if r.Status != 413 || e.Error.Code != "payload_too_large" || !strings.Contains(e.Error.Message, "workspace disk is full") ||
		!strings.HasPrefix(fmt.Sprint(e.Error.Details["path"]), "data/") {
		t.Fatalf("an upload past the disk: %d %s", r.Status, r.Body)
	}
	return e.Error
}

// noneBut fails when session id's workspace holds a file other than want (a refused upload's part).
func noneBut(t *testing.T, ts *testServer, id string, want ...string) {
	t.Helper()
	files, err := ts.c.ListFiles(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(want, f.Path) {
			t.Errorf("left behind by a refused upload: %s (%d bytes)", f.Path, f.Size)
		}
	}
}

// TestDiskRequestWithoutDisks: a server whose workspaces have no disk of their own refuses
// sandbox.disk instead of ignoring it.
func TestDiskRequestWithoutDisks(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	r := ts.raw("POST", "/api/sessions", `{"session_id": "d", "sandbox": {"disk": "1Gi"}}`)
	if r.Status != 400 || !strings.Contains(string(r.Body), "sandbox.disk") {
		t.Errorf("disk without disks: %d %s", r.Status, r.Body)
	}
	errCode(t, errOf(ts.c.GetSession(t.Context(), "d")), 404, "not_found")
}
