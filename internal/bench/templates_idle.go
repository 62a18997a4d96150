package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// What an idle live session costs the node's server: its CPU over a quiet window with the burst's
// sessions live and idle, beside the same window before the burst, per second and per session.
// Every live kernel is watched (heartbeats, its box's limit counters, cost samples) whether it runs
// anything or not, so this is the price of keeping a session live rather than hibernated.

// idleWindow is how long each quiet window is.
func idleWindow(env *benchEnv) time.Duration {
	if env.Quick {
		return 2 * time.Second
	}
	return 10 * time.Second
}

// selfCPUOver is this process's CPU over window (the in-process server's: the benchmark waits).
func selfCPUOver(ctx context.Context, window time.Duration) (time.Duration, error) {
	before := selfCPU()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	return selfCPU() - before, nil
}

// selfCPU is this process's user + system CPU (its threads, not its children: kernels are not
// counted, they are the sessions' own).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleRow: the server's CPU per idle live session, from a window with `live` sessions beside one
// with `base` of them.
func idleRow(live, base int, cpuLive, cpuBase, window time.Duration, note string) benchRow {
	perSec := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / window.Seconds() }
	per := (perSec(cpuLive) - perSec(cpuBase)) / float64(max(live-base, 1))
	return benchRow{Name: "server CPU per idle live session (heartbeats, limit watch, cost samples)",
		Ours:  fmt.Sprintf("%.2f ms/s", per),
		Peer:  fmt.Sprintf("%.1f ms/s (the server with %d live)", perSec(cpuBase), base),
		Ratio: fmt.Sprintf("%.0f%% of a core for 100", per*10),
		Note:  fmt.Sprintf("%.1f ms/s with %d live, over %s; %s", perSec(cpuLive), live, window, note)}
}
