package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindSpecSystemPython(t *testing.T) {
	t.Setenv("JUPYTER_PATH", "")
	for _, name := range []string{"python3", "python", "", "Python3"} {
		s, err := FindSpec(name, "")
		if err != nil {
			t.Fatalf("FindSpec(%q): %v", name, err)
		}
		if s.Name != "python3" || s.Language != "python" || s.InterruptMode != "signal" {
			t.Errorf("FindSpec(%q) = %+v", name, s)
		}
		if s.ResourceDir == "" || len(s.Argv) < 3 {
			t.Errorf("FindSpec(%q): resource dir %q argv %q", name, s.ResourceDir, s.Argv)
		}
	}
}

func TestFindSpecJupyterPathAndOverride(t *testing.T) {
	dir := t.TempDir()
	writeSpec := func(name, body string) {
		d := filepath.Join(dir, "kernels", name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kernel.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec("python3", `{"argv":["python3","-m","ipykernel_launcher","-f","{connection_file}"],"display_name":"Mine","language":"python","interrupt_mode":"message","env":{"A":"1"}}`)
	writeSpec("ir", `{"argv":["R","--slave","-e","IRkernel::main()","--args","{connection_file}"],"display_name":"R","language":"R"}`)
	writeSpec("broken", `{not json`)
	t.Setenv("JUPYTER_PATH", dir)

	s, err := FindSpec("python", "/opt/py/bin/python3.12")
	if err != nil {
		t.Fatal(err)
	}
	if s.DisplayName != "Mine" || s.InterruptMode != "message" || s.Env["A"] != "1" {
		t.Errorf("JUPYTER_PATH spec not preferred: %+v", s)
	}
	if s.Argv[0] != "/opt/py/bin/python3.12" || s.Argv[1] != "-m" {
		t.Errorf("python override: argv %q", s.Argv)
	}
	if got := s.argv("/r/c.json"); got[4] != "/r/c.json" {
		t.Errorf("connection file not substituted: %q", got)
	}
	r, err := FindSpec("ir", "/usr/bin/python3")
	if err != nil {
		t.Fatal(err)
	}
	if r.Argv[0] != "R" {
		t.Errorf("python override applied to a non-python kernel: %q", r.Argv)
	}
	if _, err := FindSpec("nope", ""); !errors.Is(err, ErrNoSpec) {
		t.Errorf("missing spec: %v", err)
	}
	if _, err := FindSpec("broken", ""); err == nil {
		t.Error("a broken kernel.json was accepted")
	}
	all, err := ListSpecs()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range all {
		names[s.Name] = true
	}
	if !names["python3"] || !names["ir"] || names["broken"] {
		t.Errorf("ListSpecs names = %v", names)
	}
}

func TestBuiltinPythonSpec(t *testing.T) {
	s := builtinPythonSpec("")
	want := []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}
	for i := range want {
		if s.Argv[i] != want[i] {
			t.Fatalf("argv = %q, want %q", s.Argv, want)
		}
	}
	if builtinPythonSpec("/x/python3").Argv[0] != "/x/python3" {
		t.Error("python not used by the built-in spec")
	}
}
