package session

import (
	"context"
	"errors"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/agentops"
)

// variablesTimeout bounds the kernel's answer to the probe.
const variablesTimeout = 10 * time.Second

// Variables is the answer of GET /api/sessions/{id}/variables (agentops.ListOf makes it).
type Variables = agentops.List

// Variables lists the session's variables without disturbing it: the kernel evaluates one silent
// user expression (no execution count, no history, no name added) when it is idle; when it is busy
// or there is no kernel, the answer comes from the latest checkpoint (types, no shapes or sizes). It
// never starts a kernel.
func (ls *Session) Variables(ctx context.Context) (*Variables, error) {
	s := ls.svc
	var detail *persistence.CheckpointDetail
	cp, err := s.store.LatestCheckpoint(ctx, ls.id)
	if err == nil {
		if detail, err = s.ckpt.Detail(ctx, s.store, cp); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, carryover.ErrNotFound) {
		return nil, err
	}
	live, note := ls.probeVariables(ctx)
	return agentops.ListOf(live, note, detail), nil
}

// probeVariables asks an idle kernel; nil and a note when it cannot.
func (ls *Session) probeVariables(ctx context.Context) ([]agentops.VariableInfo, string) {
	k := ls.currentKernel()
	if k == nil {
		return nil, "no kernel is running: the list comes from the latest checkpoint"
	}
	if !ls.lock.TryLock() {
		return nil, "the kernel is busy: the list comes from the latest checkpoint"
	}
	defer ls.lock.Unlock()
	ctx, cancel := context.WithTimeout(ctx, variablesTimeout)
	defer cancel()
	vs, err := agentops.Variables(ctx, k)
	if err != nil {
		return nil, "the kernel could not list its variables: " + err.Error()
	}
	return vs, ""
}

// CheckpointDetail returns one checkpoint's variables (type, size, content reference) and files,
// for the UI's checkpoint diff.
func (ls *Session) CheckpointDetail(ctx context.Context, cid string) (*persistence.CheckpointDetail, error) {
	s := ls.svc
	cp, err := checkpointByID(ctx, s.store, ls.id, cid)
	if err != nil {
		return nil, err
	}
	return s.ckpt.Detail(ctx, s.store, cp)
}
