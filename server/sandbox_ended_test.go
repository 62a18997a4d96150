package server_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// TestSandboxEndedProcessesNamed: background processes a session started (a Popen'd server) end
// with a rotation or a hibernation, and the sandbox_terminated event and the next run's answer
// name them (pid as the session saw it, command line).
func TestSandboxEndedProcessesNamed(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.create("bg", nil)
	start := "import subprocess, sys\nsrv = subprocess.Popen([sys.executable, '-m', 'http.server', '8765'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\nslp = subprocess.Popen(['sleep', '1000'])\nprint(srv.pid, slp.pid)"
	pids := strings.Fields(ts.stdout("bg", start))
	check := func(what string, procs []client.EndedProcess) {
		t.Helper()
		got := map[string]string{}
		for _, p := range procs {
			got[strconv.Itoa(p.PID)] = p.Command
		}
		if len(pids) != 2 || !strings.Contains(got[pids[0]], "http.server 8765") || got[pids[1]] != "sleep 1000" {
			t.Errorf("%s: processes_ended %s, started %v", what, dump(procs), pids)
		}
	}
	ts.act(ts.c.Rotate, "bg")
	r := ts.run("bg", "print('after rotation')")
	check("run after rotation", r.ProcessesEnded)
	ev := ts.events("bg", 0, 100, "sandbox_terminated")
	if len(ev) == 0 || !strings.Contains(dump(ev[len(ev)-1]), "http.server 8765") {
		t.Errorf("sandbox_terminated event: %s", dump(ev))
	}
	if r := ts.run("bg", "print(1)"); len(r.ProcessesEnded) != 0 {
		t.Errorf("told twice: %s", dump(r.ProcessesEnded))
	}
	// Hibernation: the same.
	pids = strings.Fields(ts.stdout("bg", start))
	ts.act(ts.c.Hibernate, "bg")
	check("run after hibernation", ts.run("bg", "print('back')").ProcessesEnded)
	// None started, none named.
	ts.act(ts.c.Rotate, "bg")
	if r := ts.run("bg", "print(2)"); len(r.ProcessesEnded) != 0 {
		t.Errorf("nothing ran in the background: %s", dump(r.ProcessesEnded))
	}
	// A kernel's death takes them too (the box goes with its kernel, so they are named from the last
	// cost sample, taken at a turn's end at most once a second): in the dying run's answer and in
	// the kernel_died event.
	pids = strings.Fields(ts.stdout("bg", start))
	time.Sleep(1100 * time.Millisecond)
	ts.run("bg", "print(3)")
	r, _, _ = ts.runT("bg", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", 0)
	if r == nil {
		t.Fatal("no answer for the run whose kernel died")
	}
	check("the run whose kernel died", r.ProcessesEnded)
	ev = ts.events("bg", 0, 100, "kernel_died")
	if len(ev) == 0 || !strings.Contains(dump(ev[len(ev)-1]), "http.server 8765") {
		t.Errorf("kernel_died event: %s", dump(ev))
	}
}
