package server_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestExecBinaryOutput: a command whose output is not UTF-8 answers its exact bytes in
// stdout_base64 / stderr_base64 beside the strings (which hold U+FFFD where a byte could not be
// carried: before, that was all there was, the bytes lost); text output has neither field.
func TestExecBinaryOutput(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "bin"})
	x := ts.exec("bin", client.ExecRequest{Command: `printf '\377\376PNG\000\n'; printf 'caf\351' >&2`})
	if want := []byte("\xff\xfePNG\x00\n"); !bytes.Equal(x.StdoutBase64, want) || !strings.Contains(x.Stdout, "\uFFFD") {
		t.Errorf("stdout %q, stdout_base64 %q; want the bytes %q", x.Stdout, x.StdoutBase64, want)
	}
	if want := []byte("caf\xe9"); !bytes.Equal(x.StderrBase64, want) {
		t.Errorf("stderr %q, stderr_base64 %q; want %q", x.Stderr, x.StderrBase64, want)
	}
	x = ts.exec("bin", client.ExecRequest{Command: "echo 'café ok'"})
	if x.Stdout != "café ok\n" || x.StdoutBase64 != nil || x.StderrBase64 != nil {
		t.Errorf("text output: %s", dump(x))
	}
}
