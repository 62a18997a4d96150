package server_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// parentTemplate is the kernel template (kernel/template) that forked the kernel of session id, from
// the kernel's own parent pid; 0 when its parent is no template (a cold start).
func parentTemplate(t *testing.T, ts *testServer, id string) int {
	t.Helper()
	ppid, err := strconv.Atoi(resultOf(ts.run(id, "import os as _os\n_os.getppid()")))
	if err != nil {
		t.Fatal(err)
	}
	if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid)); !strings.Contains(string(cmd), "carryover_template") {
		return 0
	}
	return ppid
}

// TestTemplateKilledLosesNothing: sessions' kernels are forked from the template (sandbox off,
// pool.templates on by default). A kill -9 of the template takes no session's kernel or state with
// it: the session answers from the same kernel, and later kernels come from a new template.
func TestTemplateKilledLosesNothing(t *testing.T) {
	t.Parallel()
	ts := startServerOwnTemplate(t, "")
	s := ts.newSession(client.CreateRequest{})
	ts.run(s.ID, "v = 41")
	tmpl := parentTemplate(t, ts, s.ID)
	if tmpl == 0 {
		t.Fatal("the session's kernel was not forked from a template")
	}
	if err := syscall.Kill(tmpl, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := resultOf(ts.run(s.ID, "v + 1")); got != "42" {
		t.Fatalf("after kill -9 of the template the session answers %q, want 42 from the same kernel", got)
	}
	if ts.session(s.ID).LastCheckpoint == nil {
		t.Fatal("no checkpoint committed")
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		s2 := ts.newSession(client.CreateRequest{})
		if p := parentTemplate(t, ts, s2.ID); p != 0 && p != tmpl {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no kernel forked from a new template after kill -9 of the old one")
		}
		time.Sleep(time.Second)
	}
	if got := resultOf(ts.run(s.ID, "v")); got != "41" {
		t.Errorf("the first session answers %q, want 41", got)
	}
	// GET /api/status counts the template's restart and shows the new one warm (no spare boxes
	// without the sandbox).
	st, err := ts.c.Status(ts.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if tm := st.Templates; tm == nil || tm.Restarts < 1 || tm.Forks < 2 || tm.Live != 1 || tm.USSBytes <= 0 || tm.SpareBoxes != nil {
		t.Errorf("status templates = %s: want a restart counted, >= 2 forks, the new template warm with its memory", dump(tm))
	}
}
