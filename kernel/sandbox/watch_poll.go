package sandbox

import (
	"sync"
	"time"
)

// counterPoller reads the limit-hit counters of every watched box of a provisioner in one goroutine,
// every watchEvery, and wakes a box's watch only when its counters changed. A ticker in each watch
// woke a goroutine per live kernel four times a second whether its box did anything or not: once the
// heartbeats of idle kernels were slowed, those wake-ups were the largest part of an idle node's
// server CPU. The reads themselves (two preads of files held open, per box) are cheap; the zero
// value is ready, and its goroutine runs only while something is watched.
type counterPoller struct {
	mu      sync.Mutex
	watched map[*boxKernel]*polled
	running bool
}

// polled is one watched box's counters as last read, and the wake-up of its watch.
type polled struct {
	last    Events        // read and written by the poller's goroutine only (after add)
	changed chan struct{} // capacity 1: a change not yet taken needs no second wake-up
}

// add watches k's box from counters base and answers the channel that says they changed since.
func (cp *counterPoller) add(k *boxKernel, base Events) <-chan struct{} {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.watched == nil {
		cp.watched = map[*boxKernel]*polled{}
	}
	p := &polled{last: base, changed: make(chan struct{}, 1)}
	cp.watched[k] = p
	if !cp.running {
		cp.running = true
		go cp.loop()
	}
	return p.changed
}

// remove stops watching k's box.
func (cp *counterPoller) remove(k *boxKernel) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	delete(cp.watched, k)
}

// loop polls until nothing is watched.
func (cp *counterPoller) loop() {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	type entry struct {
		k *boxKernel
		p *polled
	}
	var batch []entry
	for range t.C {
		cp.mu.Lock()
		if len(cp.watched) == 0 {
			cp.running = false
			cp.mu.Unlock()
			return
		}
		batch = batch[:0]
		for k, p := range cp.watched {
			batch = append(batch, entry{k, p})
		}
		cp.mu.Unlock()
		for _, e := range batch {
			poll(e.k, e.p) // one removed meanwhile is read once more: its channel has no reader left
		}
	}
}

// poll reads k's counters and wakes its watch if they changed.
func poll(k *boxKernel, p *polled) {
	if ev := k.box.Events(); ev != p.last {
		p.last = ev
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
}
