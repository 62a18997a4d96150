package server_test

import (
	"strings"
	"testing"

	"github.com/carryover/carryover/configs"
)

// With the sandbox and pool.templates on (the defaults), sessions' kernels are forked from the warm
// template into boxes of their own: the template's modules are there (numpy pre-imported, the
// template's box module), and each is still its own sandbox (its uid, the filter, no capability,
// its box's init as parent); siblings share no RNG stream. The isolation itself is what every other
// sandbox test of this package checks, on these forked kernels.
func TestSandboxedKernelsAreForked(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t, func(c *configs.Config) { c.Persistence.PreImport = []string{"numpy"} })
	ts.create("fa", nil)
	ts.create("fb", nil)
	code := `import os, sys
st = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())
print('carryover_box' in sys.modules, 'numpy' in sys.modules, os.getuid(), os.getppid(),
      st['Seccomp'].strip(), st['CapEff'].strip(), st['NoNewPrivs'].strip())
import numpy; print(numpy.random.randint(2**62))`
	a, b := strings.Fields(ts.stdout("fa", code)), strings.Fields(ts.stdout("fb", code))
	for _, f := range [][]string{a, b} {
		if len(f) != 8 || f[0] != "True" || f[1] != "True" || f[2] == "0" || f[3] != "1" || f[4] != "2" ||
			f[5] != "0000000000000000" || f[6] != "1" {
			t.Errorf("kernel facts %v: want forked (the template's modules), the box's uid, init as parent, seccomp 2, no caps, no_new_privs", f)
		}
	}
	if len(a) == 8 && len(b) == 8 && (a[2] == b[2] || a[7] == b[7]) {
		t.Errorf("sibling sessions share a uid or an RNG stream: %v %v", a, b)
	}
}
