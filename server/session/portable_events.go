package session

// portable_events.go: an archive's event log (GET .../export?events=true, which the front door
// reads through Events) back into the session an import makes.

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
)

// eventImporter is a store that appends another log's events keeping their times (the sqlite and
// postgres stores).
type eventImporter interface {
	ImportEvents(ctx context.Context, sessionID string, evs []carryover.Event) error
}

// importEvents appends the archive's events (when it carries them) to the new session's log, with
// their types, payloads and times; they take new sequence numbers.
func (s *Service) importEvents(ctx context.Context, id string, evs []carryover.Event) error {
	if len(evs) == 0 {
		return nil
	}
	ei, ok := s.store.(eventImporter)
	if !ok {
		return carryover.Errorf(carryover.CodeInvalid, "this server's store cannot import events: import the archive exported without them")
	}
	if err := ei.ImportEvents(ctx, id, evs); err != nil {
		return fmt.Errorf("import: events: %w", err)
	}
	return nil
}
