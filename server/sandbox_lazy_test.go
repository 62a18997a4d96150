package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestSandboxWakeIsLazy: in a sandboxed kernel (seccomp on), a wake maps a large array at once and
// the server fills it through the userfaultfd the kernel made from the lent device; the values, a
// write(2) straight from the array and a change after the wake all come back, across two wakes.
func TestSandboxWakeIsLazy(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.create("lz", nil)
	ts.stdout("lz", "import numpy as np\nbig = np.random.default_rng(3).random(9 << 20)\ns = float(big.sum())")
	restored := func(what string) client.RestoreResult {
		t.Helper()
		ev := ts.events("lz", 0, 100, "checkpoint_restored")
		var r client.RestoreResult
		if len(ev) == 0 || json.Unmarshal(ev[len(ev)-1].Payload, &r) != nil {
			t.Fatalf("%s: no checkpoint_restored event: %s", what, dump(ev))
		}
		return r
	}
	ts.act(ts.c.Hibernate, "lz")
	got := ts.stdout("lz", "with open('big.bin', 'wb') as f:\n    big.tofile(f)\n"+
		"print(float(big.sum()) == s, bool((np.fromfile('big.bin') == big).all()))\nbig[7] = -7.0\ns = float(big.sum())")
	if strings.TrimSpace(got) != "True True" {
		t.Fatalf("after the first wake (sum equal, written file equal): %q", got)
	}
	if r := restored("first wake"); r.Timings.LazyBytes != 72<<20 || r.Timings.LazyOff != "" {
		t.Fatalf("first wake: lazy bytes %d (%q), want the array's 72 MiB", r.Timings.LazyBytes, r.Timings.LazyOff)
	}
	ts.act(ts.c.Hibernate, "lz")
	if got := ts.stdout("lz", "print(float(big.sum()) == s, float(big[7]))"); strings.TrimSpace(got) != "True -7.0" {
		t.Fatalf("after the second wake: %q", got)
	}
}
