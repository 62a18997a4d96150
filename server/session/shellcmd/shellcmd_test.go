package shellcmd

import (
	"slices"
	"strings"
	"testing"

	"github.com/carryover/carryover"
)

func TestExecArgv(t *testing.T) {
	for _, tc := range []struct {
		cmd  any
		want []string
		bad  bool
	}{
		{cmd: "ls -l", want: []string{"/bin/sh", "-c", "ls -l"}},
		{cmd: []any{"echo", "a b"}, want: []string{"echo", "a b"}},
		{cmd: "", bad: true},
		{cmd: []any{}, bad: true},
		{cmd: []any{"echo", 1.0}, bad: true},
		{cmd: 42.0, bad: true},
		{cmd: nil, bad: true},
	} {
		got, err := Argv(tc.cmd)
		if tc.bad {
			if carryover.ErrorCode(err) != carryover.CodeInvalid || carryover.ErrorOf(err).Details["field"] != "command" {
				t.Errorf("argv(%#v) = %v, %v; want invalid command", tc.cmd, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("argv(%#v) = %q, %v; want %q", tc.cmd, got, err, tc.want)
		}
	}
}

func TestCommandText(t *testing.T) {
	for _, tc := range []struct {
		cmd  any
		argv []string
		want string
	}{
		{"echo hi | wc", nil, "echo hi | wc"},
		{nil, []string{"ls", "-la", "/tmp/x_y.z", "A=1"}, "ls -la /tmp/x_y.z A=1"},
		{nil, []string{"echo", "a b", ""}, "echo 'a b' ''"},
		{nil, []string{"echo", "it's"}, `echo 'it'\''s'`},
	} {
		if got := Text(tc.cmd, tc.argv); got != tc.want {
			t.Errorf("Text(%v, %q) = %q, want %q", tc.cmd, tc.argv, got, tc.want)
		}
	}
}

func TestCappedBuffer(t *testing.T) {
	b := &Buffer{Max: 5}
	for _, p := range []string{"abc", "defg", "hi"} {
		if n, err := b.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v: a capped writer must claim everything", p, n, err)
		}
	}
	if b.Dropped() != 4 || !strings.HasPrefix(b.Text(), "abcde\n[carryover: 4 bytes dropped") {
		t.Fatalf("kept %q, dropped %d", b.Text(), b.Dropped())
	}
	u := &Buffer{Max: 5}
	_, _ = u.Write([]byte("ok"))
	if u.Text() != "ok" || u.Dropped() != 0 {
		t.Fatalf("text of a buffer under its cap = %q", u.Text())
	}
}

func TestExecEnv(t *testing.T) {
	doc := carryover.Session{AgentContext: carryover.AgentContext{EnvVars: map[string]string{"A": "1", "B": "2"}}}
	got := Env(doc, Request{Env: map[string]string{"B": "3", "C": "4"}})
	if len(got) != 3 || got["A"] != "1" || got["B"] != "3" || got["C"] != "4" {
		t.Fatalf("Env = %v: the request's vars go over the session's", got)
	}
	if doc.AgentContext.EnvVars["B"] != "2" {
		t.Fatal("Env changed the session's own env")
	}
}
