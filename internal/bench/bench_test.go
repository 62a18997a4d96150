package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestSectionsSmoke runs every section of the table in quick mode (tiny sizes, few repetitions,
// short settling waits): a section that no longer compiles, panics, fails its own checks (outputs
// lost, a gap in the events, a wrong answer) or prints no row is caught here, before a release
// measurement. The figures of a quick run mean nothing and are not checked; `make bench` measures.
// Not parallel: the sections start servers, kernels, PostgreSQL and chromium one after the other,
// as `make bench` does.
func TestSectionsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every benchmark section (minutes under load); make test runs it")
	}
	var out bytes.Buffer
	results, err := Run(t.Context(), &out, Options{Quick: true, Scratch: t.TempDir(), Log: logWriter{t}})
	t.Logf("the table:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]Result{}
	for _, r := range results {
		ran[r.Name] = r
	}
	for _, name := range SectionNames() {
		r, ok := ran[name]
		switch {
		case !ok:
			t.Errorf("section %q did not run", name)
		case r.Err != nil:
			t.Errorf("section %q failed: %v", name, r.Err)
		case r.Rows == 0:
			t.Errorf("section %q printed no row", name)
		}
		if !strings.Contains(out.String(), "== "+name+" ==") {
			t.Errorf("the table has no header for section %q", name)
		}
	}
}

// TestSectionsDistinct: every section has a name of its own (--only selects by name) and a
// function.
func TestSectionsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range sections {
		if s.Name == "" || s.Run == nil || seen[s.Name] {
			t.Errorf("section %q: empty, without a function, or named twice", s.Name)
		}
		seen[s.Name] = true
	}
}

// logWriter logs each section's time as the run goes (go test -v shows them live).
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestUnescapeMountPath: mountinfo's octal escapes are undone, so a scratch dir with a space in its
// path still has its mounts found.
func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{`/tmp/a\040b/c`: "/tmp/a b/c", `/plain`: "/plain", `/x\134y`: `/x\y`, `/end\04`: `/end\04`} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}
