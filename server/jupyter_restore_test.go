package server_test

import (
	"strings"
	"testing"
)

// TestJupyterRestoreNamed: a cell appends to a workspace file and its kernel dies before the turn
// ends, so the session comes back from the last checkpoint with the file ahead of it. A client of
// carryover's API is told in the restore report (files_ahead); a Jupyter client has no field for
// it, so the door says it in words: the dead cell's error, or a stderr notice on the next cell,
// names the file. Found by the chaos harness (an OOM kill under a Jupyter client: the file kept
// the lost turn's line and nothing said so).
func TestJupyterRestoreNamed(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	_, w := openJupyterKernel(t, ts.base)
	if reply, _ := w.execute("open('turns.txt', 'a').write('1\\n')"); reply.Content["status"] != "ok" {
		t.Fatalf("first cell: %v", reply.Content)
	}
	reply, msgs := w.execute("open('turns.txt', 'a').write('2\\n')\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
	if reply.Content["ename"] != "KernelDied" {
		t.Fatalf("the dying cell: %v", reply.Content)
	}
	told := func(msgs []jmsg) bool {
		for _, m := range msgs {
			ev, _ := m.Content["evalue"].(string)
			txt, _ := m.Content["text"].(string)
			if strings.Contains(ev, "turns.txt") || strings.Contains(txt, "turns.txt") {
				return true
			}
		}
		return false
	}
	if ev, _ := reply.Content["evalue"].(string); strings.Contains(ev, "turns.txt") || told(msgs) {
		return
	}
	reply, msgs = w.execute("print(open('turns.txt').read().split())")
	if reply.Content["status"] != "ok" || stdoutOf(msgs) != "['1', '2']\n" {
		t.Fatalf("after the death: %v %q", reply.Content, stdoutOf(msgs))
	}
	if !told(msgs) {
		t.Fatalf("the file ahead of the checkpoint (turns.txt) was named neither in the dead cell's error nor on the next cell")
	}
}
