package sandbox

import (
	"os"
	"strconv"
	"strings"

	"github.com/carryover/carryover/kernel"
)

// Background lists the box's processes other than the kernel (kernel.BackgroundLister): what a
// session started that will end with the kernel. Pids are the box's own (what the session saw).
func (k *boxKernel) Background() []kernel.BackgroundProcess {
	if k.box.isReleased() {
		return nil
	}
	if st, ok := procStat(k.PID()); !ok || st.state == 'Z' || st.state == 'X' {
		return nil // dying: the box kills the rest, so an empty list would say nothing they had
	}
	top := k.kernelProcess()
	if top == 0 || !alive(top) {
		// The kernel died and its box is killing the rest. bubblewrap outlives it for a moment, so
		// the wrapper above looks well; the kernel's orphans are reparented to the box's init by
		// then, and the oldest of them would pass for the kernel (a sample taken in that moment
		// once listed nothing, and the death named no process).
		return nil
	}
	holder := 0
	if k.fk != nil {
		holder = k.fk.holder
	}
	out := []kernel.BackgroundProcess{} // none, as opposed to nil: cannot tell
	for _, p := range k.box.processes() {
		if p == top || p == k.PID() || p == holder {
			continue
		}
		if st, ok := procStat(p); !ok || st.state == 'Z' || st.state == 'X' {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, kernel.BackgroundProcess{PID: nsPID(p),
			Command: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
	}
	return out
}

// nsPID is pid as its innermost pid namespace numbers it (the last NSpid field), else pid.
func nsPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return pid
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
					return n
				}
			}
		}
	}
	return pid
}

// KernelPID is the kernel's own host pid (kernel.KernelPIDer: its heartbeat reads that process's
// state, not the wrapper's, which runs while the kernel is stopped).
func (k *boxKernel) KernelPID() int { return k.kernelProcess() }

// kernelProcess is the kernel's host pid: the box's first sandboxed process, as seen the first time
// it was asked for (when the kernel is up: a cost sample follows its claim). It is remembered because
// "the oldest child of the box's init" names another process once the kernel is gone. 0 when none.
func (k *boxKernel) kernelProcess() int {
	k.topMu.Lock()
	defer k.topMu.Unlock()
	if k.top == 0 {
		k.top = k.box.topProcess(k.PID())
	}
	return k.top
}

// alive tells whether pid runs (neither gone nor a zombie).
func alive(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}
