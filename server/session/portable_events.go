package session

// portable_events.go: a session's event log in its archive (GET .../export?events=true) and back
// into the session an import makes.

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/archive"
)

// eventImporter is a store that appends another log's events keeping their times (the sqlite and
// postgres stores).
type eventImporter interface {
	ImportEvents(ctx context.Context, sessionID string, evs []carryover.Event) error
}

// ExportEvents is session id's event log, oldest first, as an archive's events member. A log over
// the archive's part limit is refused (payload_too_large): export without events then.
func (s *Service) ExportEvents(ctx context.Context, id string) ([]byte, error) {
	if _, err := s.get(id); err != nil {
		return nil, err
	}
	evs, err := s.store.ListEvents(ctx, id, 0, 0, "")
	if err != nil {
		return nil, fmt.Errorf("export: events: %w", err)
	}
	return archive.EncodeEvents(evs, 0)
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
