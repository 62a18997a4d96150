package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// KernelOOMScoreAdj is the oom_score_adj of kernel processes (the server keeps its own, 0 by
// default): should the kernel's OOM killer act despite the memory watch (docs/capacity.md), it
// takes a kernel, whose session comes back from its last checkpoint, never the server that holds
// every session. Raising the score needs no privilege.
const KernelOOMScoreAdj = 800

// RaiseOOMScore sets oom_score_adj of pid and of every process below it (a sandbox's wrapper forks
// the kernel itself; children forked later inherit the value), when it is lower than adj.
// Best effort: a process gone meanwhile is skipped. A process found at adj or above already is not
// descended into: it had that score before it forked anything (it raised its own as it started, as
// a kernel forked from a template does while it is one thread, or an earlier call raised it and
// then its children), so its descendants inherited it. That skips reading the children of every
// thread of a kernel (~0.5 ms on the launch's path).
func RaiseOOMScore(pid, adj int) error {
	var first error
	seen := map[int]bool{}
	queue := []int{pid}
	for len(queue) > 0 && len(seen) < 4096 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		raised, err := raiseOne(p, adj)
		if err != nil && first == nil && !os.IsNotExist(err) {
			first = err
		}
		if raised {
			queue = append(queue, childrenOf(p)...)
		}
	}
	return first
}

// raiseOne writes adj to pid's oom_score_adj unless it is already as high, and says whether it
// wrote (or tried to: a failed write still looks below, whose processes may take it).
func raiseOne(pid, adj int) (bool, error) {
	path := fmt.Sprintf("/proc/%d/oom_score_adj", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	if cur, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && cur >= adj {
		return false, nil
	}
	return true, os.WriteFile(path, []byte(strconv.Itoa(adj)), 0)
}

// childrenOf lists pid's children (/proc/PID/task/*/children).
func childrenOf(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
