package session

// portable.go: a session's export to one archive and the import of one as a new session
// (docs/export-format.md). The archive itself (its format, its checks) is persistence/archive's;
// this file gives it the checkpoint and settings to write, and makes the session an import reads.

import (
	"context"
	"fmt"
	"io"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/archive"
	"github.com/carryover/carryover/server/session/sessiondoc"
)

// ExportSource is what an export of session id writes: the checkpoint asked for (which must be the
// session's), or the session's current state (a live kernel is checkpointed first, as for a fork).
// The caller streams it with archive.Write; nothing is read into memory here.
func (s *Service) ExportSource(ctx context.Context, id, checkpointID string) (archive.Export, error) {
	ls, err := s.Session(id)
	if err != nil {
		return archive.Export{}, err
	}
	cid, err := ls.forkCheckpointID(ctx, checkpointID)
	if e := carryover.ErrorOf(err); err != nil && e.Code == carryover.CodeConflict && checkpointID == "" && ls.docCopy().LastCheckpoint == nil {
		return archive.Export{}, carryover.Errorf(carryover.CodeConflict, "session %q has no checkpoint to export yet; run something first", id)
	} else if err != nil {
		return archive.Export{}, err
	}
	cp, err := s.store.GetCheckpoint(ctx, id, cid)
	if err != nil {
		return archive.Export{}, fmt.Errorf("export: %w", err)
	}
	settings, err := sessiondoc.SettingsOf(ls.docCopy())
	if err != nil {
		return archive.Export{}, fmt.Errorf("export: settings: %w", err)
	}
	return archive.Export{Store: s.store, Checkpoint: cp, SessionID: id, Settings: settings,
		Workspace: s.cfg.workspace(id), Producer: "carryover " + carryover.Version}, nil
}

// ImportRequest is what POST /api/sessions/import takes beside the archive.
type ImportRequest struct {
	SessionID string // the new session's id; generated when empty
	MaxBytes  int64  // the archive's size limit (server.max_import_bytes)
}

// ImportResult is the answer of an import.
type ImportResult struct {
	Session       carryover.Session `json:"session"`
	CheckpointID  string            `json:"checkpoint_id"`
	Source        archive.Source    `json:"source"`
	Chunks        int               `json:"chunks"`
	ChunksPresent int               `json:"chunks_present"` // already in the store: verified, not written again
	BytesWritten  int64             `json:"bytes_written"`
	Events        int               `json:"events"` // events of the source's log appended to the new session's
	Warnings      []string          `json:"warnings"`
}

// Import reads an archive (untrusted: persistence/archive checks all of it) and makes a new session
// of the caller's tenant whose checkpoint is the archive's: pending with no kernel, like a fork, so
// its first run restores the exported state. Nothing is committed until the whole archive is read
// and verified; the sessions and stored_bytes quotas count it. A refused import leaves no session.
func (s *Service) Import(ctx context.Context, r io.Reader, req ImportRequest) (ImportResult, error) {
	tenant := carryover.TenantFromContext(ctx)
	newID := req.SessionID
	if newID == "" {
		newID = randomID("sess_")
	}
	if err := carryover.ValidateSessionID(newID); err != nil {
		return ImportResult{}, err
	}
	if _, err := s.Session(newID); err == nil {
		return ImportResult{}, carryover.Errorf(carryover.CodeConflict, "session %q already exists", newID).WithDetails("session_id", newID)
	}
	release, err := s.adm.quota.AdmitCreate(ctx, tenant) // refused before a byte is read when the tenant is full
	if err != nil {
		return ImportResult{}, err
	}
	release()
	staged, err := archive.Read(ctx, r, s.store, archive.Limits{MaxArchiveBytes: req.MaxBytes, ReadFormat: s.ckpt.WriteFormat()})
	if err != nil {
		return ImportResult{}, err
	}
	defer staged.Close()
	doc, warnings, err := sessiondoc.FromSettings(staged.Settings, newID, tenant, s.newDocs())
	if err != nil {
		return ImportResult{}, err
	}
	if err := s.adm.quota.CheckStore(ctx, tenant, staged.Written); err != nil {
		return ImportResult{}, err
	}
	ls, err := s.reserveFork(ctx, doc)
	if err != nil {
		return ImportResult{}, err
	}
	err = s.importEvents(ctx, newID, staged.Events)
	var cid string
	if err == nil {
		cid, err = s.commitImport(ctx, ls, staged)
	}
	if err != nil {
		s.mu.Lock()
		delete(s.sessions, newID)
		s.mu.Unlock()
		_ = s.store.DeleteSession(context.WithoutCancel(ctx), newID)
		return ImportResult{}, err
	}
	return ImportResult{Session: ls.docCopy().View(), CheckpointID: cid, Source: staged.Index.Source, Chunks: staged.Stats.Chunks,
		ChunksPresent: staged.Present, BytesWritten: staged.Written, Events: len(staged.Events), Warnings: warnings}, nil
}

// commitImport commits the staged checkpoint as the new session's (its working dir relocated from
// the source's workspace to this one's) and makes the session usable.
func (s *Service) commitImport(ctx context.Context, ls *Session, staged *archive.Staged) (string, error) {
	_ = s.kern.RemoveWorkspace(ls.id) // the checkpoint's files come back into a fresh workspace on first use
	cp, err := staged.Commit(ctx, ls.id, sessiondoc.Relocate(staged.Index.Source.Workspace, s.cfg.workspace(ls.id)))
	if err != nil {
		return "", fmt.Errorf("import: %w", err)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.deleted = false
	ls.doc.ExecutionCount = max(ls.doc.ExecutionCount, cp.Turn)
	ls.doc.LastCheckpoint = &carryover.CheckpointRef{ID: cp.ID, Turn: cp.Turn, CreatedAt: cp.CreatedAt}
	if err := ls.saveLocked(ctx); err != nil {
		ls.deleted = true
		return "", fmt.Errorf("import: saving session: %w", err)
	}
	return cp.ID, nil
}
