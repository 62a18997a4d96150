package session

import (
	"context"

	"github.com/carryover/carryover"
)

// Usage is what session id has used (GET /api/sessions/{id}/usage): CPU seconds and GiB-hours
// from its document (every kernel it had adds to them), its memory peak (kept in the document, so
// it outlives the kernel it was seen in), its current kernel's memory, and the bytes its kept
// checkpoints wrote, listed from the store as the stored_bytes quota counts them.
func (s *Service) Usage(ctx context.Context, id string) (carryover.Usage, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Usage{}, err
	}
	cps, err := s.store.ListCheckpoints(ctx, id)
	if err != nil {
		return carryover.Usage{}, err
	}
	ls.mu.Lock()
	doc := ls.doc
	var rss int64
	if ls.kern != nil {
		rss = ls.cost.RSS()
	}
	ls.mu.Unlock()
	u := carryover.Usage{SessionID: id, CPUSeconds: doc.BudgetConsumed.CPUSeconds, MemoryGiBHours: doc.BudgetConsumed.MemoryGiBHours,
		MemoryPeakBytes: max(doc.MemoryPeakBytes, rss), MemoryBytes: rss, StoredBytes: sumCheckpointBytes(cps),
		Checkpoints: len(cps), Sandbox: doc.Sandbox.Status}
	return u, nil
}

// sumCheckpointBytes adds up what the checkpoints wrote (the usage view and the stored_bytes quota).
func sumCheckpointBytes(cps []carryover.Checkpoint) int64 {
	var n int64
	for _, cp := range cps {
		n += cp.Bytes
	}
	return n
}
