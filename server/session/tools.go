package session

// tools.go: a session's tool registry (name, type, description, input schema), for agent loops.

import (
	"context"

	"github.com/carryover/carryover"
)

// RegisterTool adds a tool to the session's registry.
func (s *Service) RegisterTool(ctx context.Context, id string, t carryover.Tool) (carryover.Tool, error) {
	ls, err := s.Session(id)
	if err != nil {
		return t, err
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	if t.ToolType == "" {
		t.ToolType = "custom"
	}
	t.SessionID = id
	if err := s.store.PutTool(ctx, t); err != nil {
		return t, err
	}
	ls.emit(ctx, carryover.EventToolRegistered, map[string]any{"name": t.Name, "tool_type": t.ToolType})
	// The answer shows the tool as stored (its created_at is the first registration's).
	if ts, err := s.store.ListTools(ctx, id); err == nil {
		for _, st := range ts {
			if st.Name == t.Name {
				return st, nil
			}
		}
	}
	return t, nil
}
