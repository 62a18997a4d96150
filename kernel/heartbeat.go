package kernel

import (
	"fmt"
	"time"
)

// missedBeats is how many heartbeats in a row may go unanswered before the kernel counts as dead.
const missedBeats = 3

var ping = [][]byte{[]byte("ping")}

// startHeartbeat pings the kernel's heartbeat socket (an echo device in its own thread, so it answers
// even while Python is busy) every interval. A beat is missed when no echo arrived since the previous
// ping; missedBeats in a row mark the kernel dead. Counting per tick rather than by wall clock keeps a
// starved server (GC, an overloaded box) from declaring healthy kernels dead: if the ticker is late,
// so is the verdict.
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
				missed = 0
			}
			if missed >= missedBeats {
				inst.die(&DiedError{
					PID: inst.proc.PID(), ExitCode: -1,
					Reason:  fmt.Sprintf("heartbeat lost: no echo to %d pings %s apart", missedBeats, interval),
					LogTail: logTail(inst.k.opts.LogPath),
				})
				return
			}
			lastPing = time.Now().UnixNano()
			if err := inst.socks.send(chHB, ping); err != nil {
				inst.k.log.Debug("heartbeat send failed", "err", err)
			}
		}
	}()
}
