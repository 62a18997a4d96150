package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestSectionsSmoke runs every section of the table in quick mode (tiny sizes, few repetitions,
// short settling waits), one subtest each (go test -run 'TestSectionsSmoke/^keys$' runs one): a
// section that no longer compiles, panics, fails its own checks (outputs lost, a gap in the events,
// a wrong answer) or prints no row is caught here, before a release measurement. The figures of a
// quick run mean nothing and are not checked; `make bench` measures. The subtests are not parallel:
// sections count this process's kernels (none may be left, memory per session), as `make bench`
// runs them, one after the other.
func TestSectionsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every benchmark section (minutes); make test runs it")
	}
	for _, name := range SectionNames() {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			results, err := Run(t.Context(), &out, Options{Quick: true, Section: name, Scratch: t.TempDir(), Log: logWriter{t}})
			t.Logf("the table:\n%s", out.String())
			switch {
			case err != nil:
				t.Fatal(err)
			case len(results) != 1 || results[0].Name != name:
				t.Fatalf("ran %+v, want the section %q alone", results, name)
			case results[0].Err != nil:
				t.Errorf("the section failed: %v", results[0].Err)
			case results[0].Rows == 0:
				t.Error("the section printed no row")
			}
			if !strings.Contains(out.String(), "== "+name+" ==") {
				t.Error("the table has no header for the section")
			}
		})
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
