package sandbox

import "testing"

// TestUnescapeMount: mountinfo's octal escapes are undone, so a dir with a space in its path still
// has its mounts found.
func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/tmp/a\040b/c`: "/tmp/a b/c", `/plain`: "/plain", `/x\134y`: `/x\y`, `/end\04`: `/end\04`} {
		if got := UnescapeMount(in); got != want {
			t.Errorf("UnescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
