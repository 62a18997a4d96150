package session

// portable.go: a session's export to one archive and the import of one as a new session
// (docs/export-format.md). The archive itself (its format, its checks) is persistence/archive's;
// this file gives it the checkpoint and settings to write, and makes the session an import reads.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/archive"
)

// portableSettings is an archive's session.json: what a create request sets, plus the agent context
// and the execution counter. Validated on import exactly as a create request.
type portableSettings struct {
	Name           string              `json:"name"`
	Language       string              `json:"language"`
	Data           map[string]any      `json:"data"`
	Budget         *carryover.Budget   `json:"budget"`
	Rotation       *carryover.Rotation `json:"rotation"`
	Sandbox        *SandboxRequest     `json:"sandbox"`
	AgentContext   *ContextRequest     `json:"agent_context"`
	ExecutionCount int                 `json:"execution_count"`
}

// settingsOf is the settings of session doc as an archive carries them.
func settingsOf(doc carryover.Session) ([]byte, error) {
	sb := doc.Sandbox
	timeout := sb.TimeoutSeconds
	net := &NetworkRequest{Full: sb.Network, Allow: sb.NetworkAllow}
	wd := doc.AgentContext.WorkingDir
	return json.Marshal(map[string]any{
		"name": doc.Name, "language": doc.Language, "data": doc.Data, "budget": doc.Budget, "rotation": doc.Rotation,
		"sandbox": map[string]any{"cpus": sb.CPUs, "memory": sb.Memory, "disk": sb.Disk, "timeout_seconds": timeout,
			"network": networkJSON(net), "skills": sb.Skills},
		"agent_context":   map[string]any{"working_dir": wd, "env_vars": doc.AgentContext.EnvVars, "custom_state": doc.AgentContext.CustomState},
		"execution_count": doc.ExecutionCount,
	})
}

// networkJSON is a sandbox network setting as a create request writes it: a boolean, or {"allow"}.
func networkJSON(n *NetworkRequest) any {
	if n.Allow != nil {
		return map[string]any{"allow": n.Allow}
	}
	return n.Full
}

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
	settings, err := settingsOf(ls.docCopy())
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
	doc, warnings, err := s.importDoc(ctx, staged.Settings, newID, tenant)
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
	srcWS, dstWS := staged.Index.Source.Workspace, s.cfg.workspace(ls.id)
	cwd := func(c string) string {
		if srcWS != "" && srcWS != "/workspace" && (c == srcWS || strings.HasPrefix(c, srcWS+string(filepath.Separator))) {
			return dstWS + c[len(srcWS):]
		}
		return c
	}
	cp, err := staged.Commit(ctx, ls.id, cwd)
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

// importDoc is the new session's document from an archive's settings, checked as a create request's
// are. A setting this server cannot honour is dropped and named in the warnings, never silently.
func (s *Service) importDoc(ctx context.Context, raw []byte, id, tenant string) (carryover.Session, []string, error) {
	var ps portableSettings
	if err := json.Unmarshal(raw, &ps); err != nil {
		return carryover.Session{}, nil, carryover.Errorf(carryover.CodeInvalid, "archive refused: session settings: %v", err).
			WithDetails("reason", archive.ReasonCorrupt, "member", archive.SessionName)
	}
	warnings := []string{}
	if ps.Sandbox != nil && ps.Sandbox.Disk != "" && s.kern.Disks() == nil {
		warnings = append(warnings, fmt.Sprintf("sandbox.disk %s not applied: this server gives workspaces no disk of their own", ps.Sandbox.Disk))
		ps.Sandbox.Disk = ""
	}
	if ps.Language == "" {
		ps.Language = "python"
	}
	cr := CreateRequest{SessionID: id, Name: ps.Name, Language: ps.Language, Budget: ps.Budget}
	if err := cr.validate(id); err != nil {
		return carryover.Session{}, nil, err
	}
	now := time.Now().UTC()
	doc := carryover.Session{ID: id, Name: ps.Name, Language: ps.Language, State: carryover.StatePending,
		Sandbox: carryover.Sandbox{Status: carryover.SandboxNone, TimeoutSeconds: s.cfg.SandboxTimeoutSeconds, Network: s.cfg.Network},
		Data:    ps.Data, AgentContext: carryover.AgentContext{WorkingDir: "/workspace", EnvVars: map[string]string{}, CustomState: map[string]any{}},
		Tenant: tenant, OwnerNode: s.cfg.ownerNode(), ExecutionCount: max(ps.ExecutionCount, 0),
		CreatedAt: now, UpdatedAt: now, LastActivity: now}
	if doc.Data == nil {
		doc.Data = map[string]any{}
	}
	if ps.Budget != nil {
		doc.Budget = *ps.Budget
	}
	if ps.Rotation != nil {
		doc.Rotation = *ps.Rotation
	}
	if err := applySandboxRequest(&doc.Sandbox, ps.Sandbox, s.kern.CheckDisk); err != nil {
		return carryover.Session{}, nil, err
	}
	if err := importContext(&doc.AgentContext, ps.AgentContext); err != nil {
		return carryover.Session{}, nil, err
	}
	return doc, warnings, nil
}

// importContext applies an archive's agent context, checked as PATCH .../context checks one.
func importContext(ac *carryover.AgentContext, req *ContextRequest) error {
	if req == nil {
		return nil
	}
	if req.WorkingDir != nil {
		rel, err := carryover.WorkspacePath(*req.WorkingDir)
		if err != nil {
			return err
		}
		if rel != "" {
			ac.WorkingDir = "/workspace/" + rel
		}
	}
	if err := carryover.ValidateEnv(req.EnvVars, "agent_context.env_vars"); err != nil {
		return err
	}
	if req.EnvVars != nil {
		ac.EnvVars = req.EnvVars
	}
	if req.CustomState != nil {
		ac.CustomState = req.CustomState
	}
	return nil
}
