package sandbox

import "testing"

// Dotted versions compare by number, not as text (0.10 is newer than 0.5).
func TestVersionLess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		less bool
	}{{"0.4.1", "0.5.0", true}, {"0.5.0", "0.5.0", false}, {"0.10.0", "0.5.0", false}, {"0.8", "0.5.0", false}, {"0.5", "0.5.1", true}} {
		if got := versionLess(c.a, c.b); got != c.less {
			t.Errorf("versionLess(%s, %s) = %v", c.a, c.b, got)
		}
	}
}
