package session

import (
	"context"

	"github.com/carryover/carryover/server/session/workspace"
)

// FileInfo is a file of a workspace or a skill as the API lists it.
type FileInfo = workspace.FileInfo

// Files is session id's workspace directory for the files API (package workspace), made (or
// materialized from the last checkpoint) first when the session has none yet.
func (s *Service) Files(id string) (workspace.Dir, error) {
	ls, err := s.Session(id)
	if err != nil {
		return "", err
	}
	if err := ls.ensureWorkspace(context.Background()); err != nil {
		return "", err
	}
	return workspace.Dir(s.cfg.workspace(id)), nil
}
