package session

import (
	"context"
	"fmt"
	"strings"

	"github.com/carryover/carryover/kernel"
)

// outputGuard is installed in every kernel. ipykernel sends what a cell prints every 0.2 s as ONE
// iopub message, so `print("x" * 10**9)` becomes a 1 GB message the server must receive whole
// before it can drop it. The guard cuts stdout/stderr into messages of at most 1 MiB (flushing as
// it goes) and drops what a cell prints past run.max_output_bytes inside the kernel, with one
// visible notice. It protects against accidents, not malice: code can rebind sys.stdout (the
// server still caps what it keeps). It runs in a throwaway namespace: no user-visible names.
const outputGuard = `
import sys
def _install(cap, chunk=1 << 20):
    state = {"n": 0, "noticed": False}
    def reset(*_):
        state["n"] = 0
        state["noticed"] = False
    get_ipython().events.register("pre_run_cell", reset)
    def guard(stream, name):
        write, flush = stream.write, stream.flush
        def guarded(s):
            n = len(s)
            room = cap - state["n"]
            state["n"] += n
            keep = s if n <= room else s[:max(room, 0)]
            for i in range(0, len(keep), chunk):
                write(keep[i:i + chunk])
                if len(keep) > chunk:
                    flush()
            if len(keep) < n and not state["noticed"]:
                state["noticed"] = True
                flush()
                write("\n[carryover: output past run.max_output_bytes=%d was dropped in the kernel]\n" % cap)
                flush()
            return n
        stream.write = guarded
    for name in ("stdout", "stderr"):
        guard(getattr(sys, name), name)
_install(CAP)
`

// installOutputGuard loads the guard into a fresh kernel.
func (s *Service) installOutputGuard(ctx context.Context, k *kernel.Kernel) error {
	// A little under the server's own cap, so the kernel's notice still fits in what the server keeps.
	kcap := max(s.cfg.MaxOutputBytes-4096, 1024)
	src := strings.Replace(outputGuard, "_install(CAP)", fmt.Sprintf("_install(%d)", kcap), 1)
	code := fmt.Sprintf("exec(%s, {'get_ipython': get_ipython})", pyStr(src))
	if _, err := k.Eval(ctx, code, ""); err != nil {
		return fmt.Errorf("output guard: %w", err)
	}
	return nil
}
