// Package fifo is a mutex whose waiters are served in arrival order: a session's line of turns.
package fifo

import (
	"context"
	"sync"
)

// Lock is a mutex whose waiters are served in arrival order, so runs of one session
// execute in the order they were sent (sync.Mutex makes no such promise). Its zero value is unlocked.
type Lock struct {
	mu      sync.Mutex
	held    bool
	holder  any // the tag of whoever holds the lock (LockAs), nil for none
	waiters []waiter
}

// waiter is a caller in the line, and the tag it holds the lock with.
type waiter struct {
	ch  chan struct{}
	tag any
}

// Lock waits for the lock in FIFO order or until ctx ends.
func (l *Lock) Lock(ctx context.Context) error { return l.LockQueued(ctx, nil) }

// LockQueued is Lock that calls queued (when not nil) as soon as the caller holds its place in the
// line: it has the lock, or it is a waiter behind those already there. A caller that must keep the
// order of its own requests (a websocket's run frames) waits for queued before it starts the next.
func (l *Lock) LockQueued(ctx context.Context, queued func()) error {
	return l.LockAs(ctx, queued, nil)
}

// LockAs is LockQueued holding the lock with tag: Holder answers it from the moment the lock is the
// caller's until its Unlock, so others can ask what holds the session now.
func (l *Lock) LockAs(ctx context.Context, queued func(), tag any) error {
	l.mu.Lock()
	if !l.held {
		l.held, l.holder = true, tag
		l.mu.Unlock()
		if queued != nil {
			queued()
		}
		return nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, waiter{ch, tag})
	l.mu.Unlock()
	if queued != nil {
		queued()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		for i, w := range l.waiters {
			if w.ch == ch {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				l.mu.Unlock()
				return ctx.Err()
			}
		}
		l.mu.Unlock()
		// We were handed the lock just as ctx ended: pass it on.
		l.Unlock()
		return ctx.Err()
	}
}

// Unlock hands the lock to the oldest waiter, if any.
func (l *Lock) Unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiters) == 0 {
		l.held, l.holder = false, nil
		return
	}
	w := l.waiters[0]
	l.waiters = l.waiters[1:]
	l.holder = w.tag
	close(w.ch)
}

// Holder is the tag the lock is held with (LockAs): nil when it is free or held without one.
func (l *Lock) Holder() any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder
}

// Busy reports whether someone holds the lock.
func (l *Lock) Busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// TryLock takes the lock only if it is free.
func (l *Lock) TryLock() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return false
	}
	l.held, l.holder = true, nil
	return true
}
