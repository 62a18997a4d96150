package cluster

// full.go: a request the router keeps on this node although no node of the cluster had room when it
// came (route's full) is served here, where the node's own queue bounds what needs a kernel; if the
// node then refuses it, the refusal says the whole cluster is full, so a client knows another node
// would not do better. The router keeps that fact, by session, for as long as it serves the request
// (Full.keep), and the session service reshapes a capacity refusal of a claim through Full.Refusal,
// which the assembly hands it (session.Options.Refusal) as it hands the doors httpapi.StatusOf. No
// hidden value rides on the request's context.

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/carryover/carryover"
)

// Full is the router's record of the sessions whose requests it serves here in a full cluster, with
// the cluster's figures when each came. The zero value is not usable: NewFull.
type Full struct {
	mu sync.Mutex
	by map[string]*fullMark
}

// fullMark is one session's: the figures of the latest such request, and how many are in flight.
type fullMark struct {
	summary string
	n       int
}

// NewFull is an empty record.
func NewFull() *Full { return &Full{by: map[string]*fullMark{}} }

// keep records that a request for session id is served here in a full cluster (summary: the
// cluster's figures) until done is called, when the request has been answered.
func (f *Full) keep(id, summary string) (done func()) {
	f.mu.Lock()
	m := f.by[id]
	if m == nil {
		m = &fullMark{}
		f.by[id] = m
	}
	m.summary = summary
	m.n++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if m.n--; m.n == 0 {
			delete(f.by, id)
		}
		f.mu.Unlock()
	}
}

// summary is the cluster's figures of a request for session id served here now ("" when none).
func (f *Full) summary(id string) string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.by[id]; m != nil {
		return m.summary
	}
	return ""
}

// Refusal is err, a refusal of a claim of a kernel for session id, as the client is told it: a
// capacity refusal while a request for the session that the router kept here in a full cluster is
// served says the cluster is at capacity (reason cluster_full); the node's own figures and
// Retry-After stay. Any other error, or one with no such request, is returned as is.
func (f *Full) Refusal(id string, err error) error {
	summary := f.summary(id)
	var e *carryover.Error
	if summary == "" || !errors.As(err, &e) || e.Code != carryover.CodeCapacity {
		return err
	}
	retry, _ := e.RetryAfter()
	c := *e
	c.Message = fmt.Sprintf("the cluster is at capacity (%s when this request came), and so is this node: %d of %d kernels busy; retry in %d s",
		summary, e.Details["live"], e.Details["capacity"], retry)
	c.Details = maps.Clone(e.Details)
	c.Details["reason"] = "cluster_full"
	return &c
}
