package kernel

import (
	"fmt"
	"time"
)

// missedBeats is how many heartbeats in a row may go unanswered before the kernel's process is
// looked at: stopped or gone, the kernel counts as dead.
const missedBeats = 3

// idleBeatsFactor makes the default IdleHeartbeatInterval from HeartbeatInterval (500 ms -> 5 s).
const idleBeatsFactor = 10

var ping = [][]byte{[]byte("ping")}

// startHeartbeat pings the kernel's heartbeat socket (an echo device in its own thread, so it answers
// even while Python is busy): every HeartbeatInterval while the kernel works (a request of ours
// awaits its reply, or its last status was busy), every IdleHeartbeatInterval while it is idle. An
// idle kernel keeps no caller waiting, and the pings of a node's idle kernels were half of its idle
// CPU; a kernel that exits is dead at once either way (watchExit). A request sent to an idle kernel
// brings the fast pace back at once (sockets.sent), as does a busy status, so a turn sent to a
// stopped kernel fails within missedBeats fast beats. A beat is missed when no echo arrived since
// the previous ping. Counting per tick rather than by wall clock keeps a starved server (GC, an
// overloaded box) from declaring healthy kernels dead: if the ticker is late, so is the verdict.
// The verdict is heartbeatVerdict's.
func (inst *instance) startHeartbeat(fast, idle time.Duration) {
	inst.lastPong.Store(time.Now().UnixNano())
	inst.wg.Add(1)
	go func() {
		defer inst.wg.Done()
		wait := fast
		t := time.NewTimer(wait)
		defer t.Stop()
		var b beats
		for {
			select {
			case <-inst.dead:
				return
			case <-inst.socks.ctx.Done():
				return
			case <-inst.socks.sent:
				if wait > fast { // idle until now: the next beat at the working pace
					wait = fast
					t.Reset(wait)
				}
				continue
			case <-t.C:
			}
			if !inst.beat(&b, wait) {
				return
			}
			wait = idle
			if inst.working() {
				wait = fast
			}
			t.Reset(wait)
		}
	}()
}

// beats is the heartbeat's count of unanswered pings in a row and how long they went unanswered.
type beats struct {
	lastPing int64 // unix nanos
	missed   int
	silent   time.Duration
}

// beat judges the ping sent `since` ago and sends the next; false when the kernel was declared dead.
func (inst *instance) beat(b *beats, since time.Duration) bool {
	if b.lastPing != 0 && inst.lastPong.Load() < b.lastPing {
		b.missed++
		b.silent += since
	} else {
		inst.answersAgain(b.missed, b.silent)
		b.missed, b.silent = 0, 0
	}
	pid := 0 // read only when the verdict needs it
	if b.missed >= missedBeats {
		pid = ownPID(inst.proc)
	}
	if reason, dead := heartbeatVerdict(b.missed, b.silent, inst.k.opts.WedgedAfter, pid); dead {
		inst.die(&DiedError{PID: inst.proc.PID(), ExitCode: -1, Reason: reason, LogTail: logTail(inst.k.opts.LogPath)})
		return false
	} else if b.missed == missedBeats {
		inst.k.log.Warn("kernel not answering heartbeats; its process still runs, so it is given more time",
			"pid", inst.proc.PID(), "silent", b.silent, "dead_after", inst.k.opts.WedgedAfter)
	}
	b.lastPing = time.Now().UnixNano()
	if err := inst.socks.send(chHB, ping); err != nil {
		inst.k.log.Debug("heartbeat send failed", "err", err)
	}
	return true
}

// working reports whether the kernel has work a caller waits on: a request of ours awaiting its
// reply, or a last status of busy (a request of a raw client, the Jupyter door's).
func (inst *instance) working() bool {
	if inst.busy.Load() {
		return true
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return len(inst.pending) > 0
}

// noteStatus records the kernel's execution_state from an iopub status message. A kernel turning
// busy wakes the heartbeat: a raw client's request is not one of ours, and its busy status may come
// after the beat its send brought forward (a loaded machine), which found the kernel idle and set
// the idle pace.
func (inst *instance) noteStatus(m *message) {
	if m.Header.MsgType != "status" {
		return
	}
	switch (RawMessage{Content: m.Content}).ExecutionState() {
	case "busy":
		if !inst.busy.Swap(true) {
			inst.socks.wake()
		}
	case "": // no execution_state: what was last known stands
	default:
		inst.busy.Store(false)
	}
}

// answersAgain logs a kernel that was given more time and answered.
func (inst *instance) answersAgain(missed int, silent time.Duration) {
	if missed >= missedBeats {
		inst.k.log.Info("kernel answers heartbeats again", "pid", inst.proc.PID(), "silent", silent)
	}
}

// heartbeatVerdict says whether a kernel that has missed `missed` beats in a row, silent for that
// long, is dead, and why. After missedBeats, a kernel whose process is stopped (SIGSTOP) or gone is;
// one whose process still runs, sleeps or waits in the kernel (a host so loaded the echo thread is
// not scheduled, a frozen cgroup, swap) is given until wedgedAfter: declaring it dead would restore
// the session from its checkpoint and lose the turn in flight, which a late echo does not justify.
// (jupyter_client's restarter goes by the process alone; carryover also ends a kernel that is silent
// for that long.) pid is the kernel's own process (ownPID), not a sandbox's wrapper, which runs while
// the kernel inside its box is stopped.
func heartbeatVerdict(missed int, silent, wedgedAfter time.Duration, pid int) (string, bool) {
	if missed < missedBeats {
		return "", false
	}
	if !processRuns(pid) {
		return fmt.Sprintf("heartbeat lost: no echo to %d pings over %s, and its process is stopped or gone", missed, silent), true
	}
	if silent >= wedgedAfter {
		return fmt.Sprintf("heartbeat lost: no echo for %s while its process still ran", silent), true
	}
	return "", false
}

// ownPID is the pid whose state says whether the kernel runs: its own process (for a sandboxed one,
// inside its box: KernelPIDer), else the process the provisioner started.
func ownPID(p KernelProcess) int {
	if kp, ok := p.(KernelPIDer); ok {
		if pid := kp.KernelPID(); pid > 0 {
			return pid
		}
	}
	return p.PID()
}

// processRuns reports whether process pid exists and is running, sleeping or in an uninterruptible
// wait (R, S, D; a frozen cgroup's tasks show D), not stopped, traced, a zombie or gone.
func processRuns(pid int) bool {
	st, err := readStat(pid)
	if err != nil {
		return false
	}
	switch st.state {
	case 'R', 'S', 'D', 'I', 'W':
		return true
	}
	return false
}
