package session

import (
	"context"

	"github.com/carryover/carryover"
)

// What the service recorded about a session, for the front doors (they never reach the store).

// Events lists the events of session id that q selects (carryover.EventQuery).
func (s *Service) Events(ctx context.Context, id string, q carryover.EventQuery) ([]carryover.Event, error) {
	if _, err := s.Session(id); err != nil {
		return nil, err
	}
	evs, err := s.store.ListEvents(ctx, id, q)
	if evs == nil && err == nil {
		evs = []carryover.Event{}
	}
	return evs, err
}

// Executions lists the newest limit runs and shell commands of session id, oldest first.
func (s *Service) Executions(ctx context.Context, id string, limit int) ([]carryover.Execution, error) {
	if _, err := s.Session(id); err != nil {
		return nil, err
	}
	ex, err := s.store.ListExecutions(ctx, id, limit)
	if ex == nil && err == nil {
		ex = []carryover.Execution{}
	}
	return ex, err
}

// Tools lists session id's registered tools.
func (s *Service) Tools(ctx context.Context, id string) ([]carryover.Tool, error) {
	if _, err := s.Session(id); err != nil {
		return nil, err
	}
	ts, err := s.store.ListTools(ctx, id)
	if ts == nil && err == nil {
		ts = []carryover.Tool{}
	}
	return ts, err
}
