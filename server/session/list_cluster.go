package session

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/carryover/carryover"
)

// ListAll returns every session, oldest first. On a node of a cluster that is every session of the
// shared store, wherever it is served (a node holds in memory only those it serves): the ones this
// node serves as it has them, the others as their owner last saved them; owner_node is the store's
// live owner of each (nil when nobody serves it now). On one node it is List.
func (s *Service) ListAll(ctx context.Context) ([]carryover.Session, error) {
	own, ok := s.store.(carryover.Ownership)
	if !ok || s.cfg.NodeID == "" {
		return s.List(), nil
	}
	recs, err := s.store.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	owners, err := own.Owners(ctx)
	if err != nil {
		return nil, err
	}
	here := map[string]carryover.Session{}
	for _, doc := range s.List() {
		here[doc.ID] = doc
	}
	out := make([]carryover.Session, 0, len(recs))
	for _, r := range recs {
		doc, ok := here[r.ID]
		delete(here, r.ID)
		if !ok {
			if err := json.Unmarshal(r.Doc, &doc); err != nil {
				s.log.Error("session document unreadable; left out of the listing", "session", r.ID, "err", err)
				continue
			}
		}
		doc.OwnerNode = nil
		if o, ok := owners[r.ID]; ok && o.Node != "" {
			node := o.Node
			doc.OwnerNode = &node
		}
		out = append(out, doc)
	}
	for _, doc := range here { // created here, its record not yet visible
		out = append(out, doc)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}
