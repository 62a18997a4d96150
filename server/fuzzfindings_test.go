package server_test

import (
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestFuzzFindings pins what TestFuzzAPI found: each request once answered 500 or an error outside
// the API's shape, and now answers 400 invalid_request.
func TestFuzzFindings(t *testing.T) {
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "ff"})
	if _, err := ts.c.PutFile(ts.ctx(), "ff", "dir/file.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("Ω", 200) // 400 bytes: over NAME_MAX
	cases := []struct {
		name         string
		method, path string
		body         string
	}{
		// mkdirat: ENAMETOOLONG was a 500.
		{"exec in a working_dir with a name too long", "POST", "/api/sessions/ff/exec", `{"command": "true", "working_dir": "` + long + `"}`},
		// MkdirAll under a file: ENOTDIR was a 500.
		{"exec in a working_dir under a file", "POST", "/api/sessions/ff/exec", `{"command": "true", "working_dir": "dir/file.txt/sub"}`},
		{"PUT a file under a file", "PUT", "/api/sessions/ff/files/dir/file.txt/under", "x"},
		{"POST a file under a file", "POST", "/api/sessions/ff/files", `{"path": "dir/file.txt/under", "content": "x"}`},
		// open: ENAMETOOLONG was a 500.
		{"PUT a file with a name too long", "PUT", "/api/sessions/ff/files/" + long, "x"},
		{"GET a file with a name too long", "GET", "/api/sessions/ff/files/" + long, ""},
		{"DELETE a file with a name too long", "DELETE", "/api/sessions/ff/files/" + long, ""},
		// rename over a directory: EISDIR/EEXIST was a 500.
		{"PUT a file over a directory", "PUT", "/api/sessions/ff/files/dir", "x"},
		{"GET a file under a file", "GET", "/api/sessions/ff/files/dir/file.txt/under", ""},
		// gorilla's plain-text "Bad Request" for a GET that is not a websocket handshake.
		{"websocket without a handshake", "GET", "/api/sessions/ff/ws", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errCode(t, ts.raw(c.method, c.path, c.body).err(), 400, "invalid_request")
		})
	}
	if got := ts.getFile("ff", "dir/file.txt"); string(got) != "x" {
		t.Errorf("dir/file.txt is %q after the refused requests", got)
	}
}
