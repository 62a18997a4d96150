package sandbox

import (
	"fmt"
	"os"
	"time"

	"github.com/carryover/carryover/kernel"
)

// watch watches a claimed kernel's box for limit hits until the kernel process exits. A memory limit
// hit is the OOM killer's business (the kernel dies and its session is restored); it is only
// reported. A process limit hit means a fork bomb or a runaway pool: every process but the kernel is
// killed, so the limit frees up and the kernel keeps its state; if the kernel keeps forking (three
// hits in five seconds) the whole box is killed and the session restored from its last checkpoint.
func (k *boxKernel) watch() {
	defer func() {
		k.kb.mu.Lock()
		k.kb.watching = false
		k.kb.mu.Unlock()
	}()
	base := k.box.Events()
	changed := k.kb.p.counts.add(k, base)
	defer k.kb.p.counts.remove(k)
	var strikes []time.Time
	dead := k.Exited()
	for {
		select {
		case <-dead:
			if ev := k.box.Events(); ev.OOMKills > base.OOMKills {
				k.report("memory", "the kernel was killed by the out-of-memory killer; the session is restored from its last checkpoint")
			}
			return
		case <-changed: // the provisioner's poller saw the counters move (watch_poll.go)
		}
		ev := k.box.Events()
		if ev.OOMKills > base.OOMKills {
			// The victim may be the kernel (it then dies once its memory is freed, which takes a while
			// for gigabytes) or a process it started.
			select {
			case <-dead:
				continue // reported above, base untouched
			case <-time.After(2 * time.Second):
			}
			base.OOMKills = ev.OOMKills
			k.report("memory", "a process of the sandbox was killed by the out-of-memory killer; the kernel survived")
		}
		if ev.PidsMax > base.PidsMax {
			base.PidsMax = ev.PidsMax
			strikes = recent(strikes, time.Now(), 5*time.Second)
			if len(strikes) >= 3 {
				msg := fmt.Sprintf("the process limit (%d) was hit again and again: the sandbox was killed; the session is restored from its last checkpoint", k.box.Limits().Pids)
				k.appendLog("carryover sandbox: " + msg)
				k.box.Kill()
				k.report("pids", msg)
				return
			}
			n := k.killStrays()
			base.PidsMax = k.box.Events().PidsMax // its own refusals while killing are not new hits
			k.report("pids", fmt.Sprintf("the process limit (%d) was hit: %d processes were killed; the kernel and its state were kept", k.box.Limits().Pids, n))
		}
	}
}

// watchEvery is how often a live kernel's box counters are read (by the provisioner's one poller,
// watch_poll.go). Each read is a system call per counter, made for every live kernel of the node
// whether it does anything or not: at ten a second they were the largest part of an idle node's
// CPU. A limit hit waits up to this long to be seen (the limit itself holds meanwhile: the OOM
// killer has acted, forks are refused).
const watchEvery = 250 * time.Millisecond

// recent appends now to the strikes and keeps those younger than window.
func recent(strikes []time.Time, now time.Time, window time.Duration) []time.Time {
	keep := strikes[:0]
	for _, t := range strikes {
		if now.Sub(t) < window {
			keep = append(keep, t)
		}
	}
	return append(keep, now)
}

// report hands a limit hit to the OnLimit callback.
func (k *boxKernel) report(kind, msg string) {
	k.kb.mu.Lock()
	f := k.kb.onLimit
	k.kb.mu.Unlock()
	if f == nil {
		return
	}
	lim := k.box.Limits()
	f(kernel.LimitHit{Kind: kind, Message: msg, MemoryBytes: lim.MemoryBytes, CPUs: lim.CPUs, MaxProcesses: lim.Pids, Summary: lim.String()})
}

// appendLog adds a line to the kernel's log, where a death error's log tail will show it.
func (k *boxKernel) appendLog(line string) {
	f, err := os.OpenFile(k.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString("\n" + line + "\n")
}

// killStrays kills the box's processes but the kernel (and a forked kernel's holder).
func (k *boxKernel) killStrays() int {
	if k.fk == nil {
		return k.box.KillStrays(k.PID())
	}
	if k.box.isReleased() {
		return 0
	}
	return k.box.killStrays(k.PID(), k.fk.pid, k.fk.holder)
}
