package kernel

import (
	"fmt"
	"time"
)

// missedBeats is how many heartbeats in a row may go unanswered before the kernel's process is
// looked at: stopped or gone, the kernel counts as dead.
const missedBeats = 3

var ping = [][]byte{[]byte("ping")}

// startHeartbeat pings the kernel's heartbeat socket (an echo device in its own thread, so it answers
// even while Python is busy) every interval. A beat is missed when no echo arrived since the previous
// ping. Counting per tick rather than by wall clock keeps a starved server (GC, an overloaded box)
// from declaring healthy kernels dead: if the ticker is late, so is the verdict. The verdict itself is
// heartbeatVerdict's.
func (inst *instance) startHeartbeat(interval time.Duration) {
	inst.lastPong.Store(time.Now().UnixNano())
	inst.wg.Add(1)
	go func() {
		defer inst.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		var lastPing int64
		missed := 0
		for {
			select {
			case <-inst.dead:
				return
			case <-inst.socks.ctx.Done():
				return
			case <-t.C:
			}
			if lastPing != 0 && inst.lastPong.Load() < lastPing {
				missed++
			} else {
				inst.answersAgain(missed, interval)
				missed = 0
			}
			pid := 0 // read only when the verdict needs it
			if missed >= missedBeats {
				pid = ownPID(inst.proc)
			}
			if reason, dead := heartbeatVerdict(missed, interval, inst.k.opts.WedgedAfter, pid); dead {
				inst.die(&DiedError{PID: inst.proc.PID(), ExitCode: -1, Reason: reason, LogTail: logTail(inst.k.opts.LogPath)})
				return
			} else if missed == missedBeats {
				inst.k.log.Warn("kernel not answering heartbeats; its process still runs, so it is given more time",
					"pid", inst.proc.PID(), "silent", time.Duration(missed)*interval, "dead_after", inst.k.opts.WedgedAfter)
			}
			lastPing = time.Now().UnixNano()
			if err := inst.socks.send(chHB, ping); err != nil {
				inst.k.log.Debug("heartbeat send failed", "err", err)
			}
		}
	}()
}

// answersAgain logs a kernel that was given more time and answered.
func (inst *instance) answersAgain(missed int, interval time.Duration) {
	if missed >= missedBeats {
		inst.k.log.Info("kernel answers heartbeats again", "pid", inst.proc.PID(), "silent", time.Duration(missed)*interval)
	}
}

// heartbeatVerdict says whether a kernel that has missed `missed` beats in a row is dead, and why.
// After missedBeats, a kernel whose process is stopped (SIGSTOP) or gone is; one whose process still
// runs, sleeps or waits in the kernel (a host so loaded the echo thread is not scheduled, a frozen
// cgroup, swap) is given until wedgedAfter: declaring it dead would restore the session from its
// checkpoint and lose the turn in flight, which a late echo does not justify. (jupyter_client's
// restarter goes by the process alone; carryover also ends a kernel that is silent for that long.)
// pid is the kernel's own process (ownPID), not a sandbox's wrapper, which runs while the kernel
// inside its box is stopped.
func heartbeatVerdict(missed int, interval, wedgedAfter time.Duration, pid int) (string, bool) {
	if missed < missedBeats {
		return "", false
	}
	silent := time.Duration(missed) * interval
	if !processRuns(pid) {
		return fmt.Sprintf("heartbeat lost: no echo to %d pings %s apart, and its process is stopped or gone", missed, interval), true
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
