package sandbox

// strays.go finds a box's processes and kills the strays of a fork bomb, sparing the kernel.

import (
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// processes lists the box's processes that run as its uid (the sandboxed ones; bubblewrap's own
// two processes run as root outside the cgroup's limits' concern).
func (b *Box) processes() []int {
	if b.cg != nil {
		var out []int
		for _, p := range b.cg.pids() {
			if procUID(p) == b.uid {
				out = append(out, p)
			}
		}
		return out
	}
	if !b.ownUID {
		return nil // uid 0 is everybody's: without a cgroup there is no telling the box's apart
	}
	return pidsOfUID(b.uid)
}

// KillStrays SIGKILLs every sandboxed process of the box except the first one (the process
// bubblewrap started: the kernel), and returns how many it killed. After a fork bomb this leaves the
// kernel with its state and frees the process limit. leader is the pid of the box's command (the
// wrapper that became bubblewrap); bubblewrap's own processes run as root and are spared.
//
// With a pids cgroup the kernel is also made to stop forking: forks are refused (pids.max=1) and the
// kernel is paused while the strays die, then resumed with forks still refused until it has tried
// one (a `while True: os.fork()` then raises BlockingIOError) or half a second passed.
func (b *Box) KillStrays(leader int) int {
	if b.isReleased() {
		return 0
	}
	return b.killStrays(leader, b.topProcess(leader), 0)
}

// killStrays is KillStrays with the kernel (top) named, sparing spare too (a forked kernel's box
// holder: its death would end the box).
func (b *Box) killStrays(leader, top, spare int) int {
	if d, ok := b.cgDir("pids"); ok {
		_ = writeFile(filepath.Join(d, "pids.max"), "1")
		defer func() {
			v := "max"
			if l := b.Limits(); l.Pids > 0 {
				v = strconv.Itoa(l.Pids)
			}
			_ = writeFile(filepath.Join(d, "pids.max"), v)
		}()
		if top != 0 {
			_ = unix.Kill(top, unix.SIGSTOP)
			defer func() {
				before := b.Events().PidsMax
				_ = unix.Kill(top, unix.SIGCONT)
				for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && b.Events().PidsMax == before; {
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
	}
	killed := map[int]bool{}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n := 0
		for _, p := range b.processes() {
			if p == top || p == leader || p == spare {
				continue
			}
			st, ok := procStat(p)
			if !ok || st.state == 'Z' || st.state == 'X' {
				continue // dead already, waiting for its parent (or init) to reap it
			}
			if b.ownUID || st.ppid != leader { // uid 0 boxes: spare bwrap's init (child of the leader)
				if unix.Kill(p, unix.SIGKILL) == nil && !killed[p] {
					killed[p] = true
					n++
				}
			}
		}
		if n == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return len(killed)
}

// cgDir is the box's group dir of a controller in use.
func (b *Box) cgDir(ctrl string) (string, bool) {
	if b.cg == nil {
		return "", false
	}
	return b.cg.dir(ctrl)
}

// topProcess is the first sandboxed process: the oldest child of bubblewrap's init, itself the
// leader's child (orphans of a fork bomb are reparented to init too, hence "oldest"). 0 when gone.
func (b *Box) topProcess(leader int) int {
	procs := scanProcs()
	var init int
	for _, p := range procs {
		if p.ppid == leader {
			init = p.pid
		}
	}
	top, start := 0, uint64(0)
	for _, p := range procs {
		if init != 0 && p.ppid == init && (top == 0 || p.start < start) {
			top, start = p.pid, p.start
		}
	}
	return top
}
