package session

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/agentops"
)

// variablesTimeout bounds the kernel's answer to the probe.
const variablesTimeout = 10 * time.Second

// Variables is the answer of GET /api/sessions/{id}/variables.
type Variables struct {
	Variables    []agentops.VariableInfo `json:"variables"`
	Live         bool                    `json:"live"` // read from the running kernel; false: from the latest checkpoint only
	CheckpointID string                  `json:"checkpoint_id,omitempty"`
	Note         string                  `json:"note,omitempty"` // why the answer is not live
}

// Variables lists the session's variables without disturbing it: the kernel evaluates one silent
// user expression (no execution count, no history, no name added) when it is idle; when it is busy
// or there is no kernel, the answer comes from the latest checkpoint (types, no shapes or sizes). It
// never starts a kernel.
func (ls *Session) Variables(ctx context.Context) (*Variables, error) {
	s := ls.svc
	out := &Variables{Variables: []agentops.VariableInfo{}}
	saved := map[string]persistence.VariableDetail{}
	skipped := map[string]carryover.VarSkip{}
	cp, err := s.store.LatestCheckpoint(ctx, ls.id)
	if err == nil {
		d, derr := s.ckpt.Detail(ctx, s.store, cp)
		if derr != nil {
			return nil, derr
		}
		out.CheckpointID = cp.ID
		for _, v := range d.Variables {
			saved[v.Name] = v
		}
		for _, v := range d.Skipped {
			skipped[v.Name] = v
		}
	} else if !errors.Is(err, carryover.ErrNotFound) {
		return nil, err
	}
	live, note := ls.probeVariables(ctx)
	out.Note = note
	if live != nil {
		out.Live = true
		out.Variables = live
	} else {
		for _, v := range saved {
			if v.Kind != "imp" {
				out.Variables = append(out.Variables, agentops.VariableInfo{Name: v.Name, Type: v.Type})
			}
		}
		for _, v := range skipped {
			out.Variables = append(out.Variables, agentops.VariableInfo{Name: v.Name, Type: v.Type})
		}
	}
	for i := range out.Variables {
		v := &out.Variables[i]
		if sk, ok := skipped[v.Name]; ok {
			v.State, v.Reason = "skipped", sk.Reason
		} else if _, ok := saved[v.Name]; ok {
			v.State = "saved"
		} else {
			v.State = "unsaved"
		}
	}
	sort.Slice(out.Variables, func(i, j int) bool { return out.Variables[i].Name < out.Variables[j].Name })
	return out, nil
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
