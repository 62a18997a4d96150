package session

import (
	"context"

	"github.com/carryover/carryover"
)

// What the service recorded about a session, for the front doors (they never reach the store).

// Events lists the events of session id that q selects (carryover.EventQuery).
//
// A type filter this build does not log is a typo (invalid), unless the session's log holds events
// of it: imported from an archive a newer build wrote, they can be filtered by it.
func (s *Service) Events(ctx context.Context, id string, q carryover.EventQuery) ([]carryover.Event, error) {
	evs, err := listOf(s, id, func() ([]carryover.Event, error) { return s.store.ListEvents(ctx, id, q) })
	if err != nil || len(evs) > 0 || q.Type == "" || carryover.KnownEventType(q.Type) {
		return evs, err
	}
	held, err := s.store.ListEvents(ctx, id, carryover.EventQuery{Type: q.Type, Limit: 1})
	if err == nil && len(held) == 0 {
		err = carryover.UnknownEventType(q.Type)
	}
	return evs, err
}

// Executions lists the newest limit runs and shell commands of session id, oldest first.
func (s *Service) Executions(ctx context.Context, id string, limit int) ([]carryover.Execution, error) {
	return listOf(s, id, func() ([]carryover.Execution, error) { return s.store.ListExecutions(ctx, id, limit) })
}

// Tools lists session id's registered tools.
func (s *Service) Tools(ctx context.Context, id string) ([]carryover.Tool, error) {
	return listOf(s, id, func() ([]carryover.Tool, error) { return s.store.ListTools(ctx, id) })
}

// listOf answers what list reads of session id (not_found for an unknown session), never a nil
// slice: an empty list is [] in an answer, not null.
func listOf[T any](s *Service, id string, list func() ([]T, error)) ([]T, error) {
	if _, err := s.Session(id); err != nil {
		return nil, err
	}
	out, err := list()
	if out == nil && err == nil {
		out = []T{}
	}
	return out, err
}
