package server_test

import (
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// TestSandboxTmpInodes: a sandbox's /tmp holds at most sandbox.tmp_inodes files (ENOSPC past it,
// with its size cap far away), is writable by the session and sticky, and an exec command's /tmp
// has the same cap.
func TestSandboxTmpInodes(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t, func(c *configs.Config) { c.Sandbox.TmpInodes = 300 })
	ts.create("ti", nil)
	code := `import os
st = os.stat('/tmp')
n = 0
try:
    for i in range(5000):
        open('/tmp/f%d' % i, 'w').close(); n += 1
    print('no cap')
except OSError as e:
    print('errno', e.errno, 200 < n < 300, oct(st.st_mode & 0o7777))`
	if out := ts.stdout("ti", code); out != "errno 28 True 0o1777" {
		t.Errorf("files in /tmp: %q", out)
	}
	x := ts.exec("ti", client.ExecRequest{Command: "i=0; while [ $i -lt 1000 ] && touch /tmp/e$i 2>/dev/null; do i=$((i+1)); done; echo $i"})
	if x.ExitCode != 0 || x.Stdout == "" || x.Stdout == "1000\n" {
		t.Errorf("exec's /tmp: %s", dump(x))
	}
}
