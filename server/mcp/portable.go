package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/archive"
	"github.com/carryover/carryover/server/session"
)

// maxArchiveBytes bounds the archives the MCP tools carry inline (base64 in a tool call): larger
// sessions move through GET /api/sessions/{id}/export and POST /api/sessions/import, streamed.
const maxArchiveBytes = 16 << 20

type exportIn struct {
	SessionID    string `json:"session_id" jsonschema:"the session to export"`
	CheckpointID string `json:"checkpoint_id,omitempty" jsonschema:"the checkpoint to export (default: the session's current state)"`
	Events       bool   `json:"events,omitempty" jsonschema:"also carry the session's event log (an archive of version 2), as GET .../export?events=true"`
}

type exportOut struct {
	SessionID     string `json:"session_id"`
	CheckpointID  string `json:"checkpoint_id"`
	Bytes         int    `json:"bytes"`
	ArchiveBase64 string `json:"archive_base64" jsonschema:"the archive (docs/export-format.md), base64"`
}

type importIn struct {
	ArchiveBase64 string `json:"archive_base64" jsonschema:"an archive of export_session (or of GET /api/sessions/{id}/export), base64"`
	NewSessionID  string `json:"new_session_id,omitempty" jsonschema:"the new session's id (generated when omitted)"`
}

type importOut struct {
	SessionID       string   `json:"session_id" jsonschema:"the new session"`
	CheckpointID    string   `json:"checkpoint_id"`
	SourceSessionID string   `json:"source_session_id"`
	Chunks          int      `json:"chunks"`
	ChunksPresent   int      `json:"chunks_present"`
	BytesWritten    int64    `json:"bytes_written"`
	Events          int      `json:"events" jsonschema:"events of the source's log appended to the new session's"`
	Warnings        []string `json:"warnings"`
}

func (t *tools) registerPortable(s *sdk.Server) {
	add(t, s, &sdk.Tool{Name: "export_session", Description: "Export a session's whole state (variables, files, installed packages, settings) " +
		"as one archive, base64, to import on any carryover server (up to 16 MiB here; larger through the HTTP API)."}, t.exportSession)
	add(t, s, &sdk.Tool{Name: "import_session", Description: "Make a new session from an archive of export_session: its first run " +
		"restores the exported state. The archive is verified whole before anything is kept."}, t.importSession)
}

func (t *tools) exportSession(ctx context.Context, req *sdk.CallToolRequest, in exportIn) (*sdk.CallToolResult, exportOut, error) {
	ctx, err := t.scope(ctx, req, in.SessionID)
	if err != nil {
		return nil, exportOut{}, t.fail(req, err)
	}
	e, err := t.svc.ExportSource(ctx, in.SessionID, in.CheckpointID)
	if err == nil && in.Events {
		e.Events, err = t.exportEvents(ctx, in.SessionID)
	}
	if err != nil {
		return nil, exportOut{}, t.fail(req, err)
	}
	var buf bytes.Buffer
	if _, err := archive.Write(ctx, &capped{w: &buf, left: maxArchiveBytes}, e); errors.Is(err, errOverCap) {
		return nil, exportOut{}, t.fail(req, carryover.Errorf(carryover.CodePayloadTooLarge,
			"the archive is over %d bytes: export it with GET /api/sessions/%s/export", maxArchiveBytes, in.SessionID))
	} else if err != nil {
		return nil, exportOut{}, t.fail(req, err)
	}
	out := exportOut{SessionID: in.SessionID, CheckpointID: e.Checkpoint.ID, Bytes: buf.Len(),
		ArchiveBase64: base64.StdEncoding.EncodeToString(buf.Bytes())}
	return textResult(fmt.Sprintf("exported checkpoint %s of %s: %d bytes (archive_base64)", out.CheckpointID, in.SessionID, out.Bytes)), out, nil
}

func (t *tools) importSession(ctx context.Context, req *sdk.CallToolRequest, in importIn) (*sdk.CallToolResult, importOut, error) {
	ctx, err := t.scope(ctx, req, "")
	if err != nil {
		return nil, importOut{}, t.fail(req, err)
	}
	raw, err := base64.StdEncoding.DecodeString(in.ArchiveBase64)
	if err != nil {
		return nil, importOut{}, t.fail(req, carryover.Errorf(carryover.CodeInvalid, "archive_base64 is not base64: %v", err))
	}
	res, err := t.svc.Import(ctx, bytes.NewReader(raw), session.ImportRequest{SessionID: in.NewSessionID, MaxBytes: maxArchiveBytes})
	if err != nil {
		return nil, importOut{}, t.fail(req, err)
	}
	out := importOut{SessionID: res.Session.ID, CheckpointID: res.CheckpointID, SourceSessionID: res.Source.SessionID,
		Chunks: res.Chunks, ChunksPresent: res.ChunksPresent, BytesWritten: res.BytesWritten, Events: res.Events, Warnings: res.Warnings}
	return textResult(fmt.Sprintf("imported %s (turn %d) as session_id %s", res.Source.SessionID, res.Source.Turn, res.Session.ID)), out, nil
}

// exportEvents is session id's event log, oldest first, as an archive's events member (as the HTTP
// route's ?events=true); a log over the archive's part limit is payload_too_large.
func (t *tools) exportEvents(ctx context.Context, id string) ([]byte, error) {
	evs, err := t.svc.Events(ctx, id, carryover.EventQuery{})
	if err != nil {
		return nil, fmt.Errorf("export: events: %w", err)
	}
	return archive.EncodeEvents(evs, 0)
}

var errOverCap = errors.New("over the cap")

// capped is a writer that refuses to grow past left bytes.
type capped struct {
	w    *bytes.Buffer
	left int
}

func (c *capped) Write(p []byte) (int, error) {
	if len(p) > c.left {
		return 0, errOverCap
	}
	c.left -= len(p)
	return c.w.Write(p)
}
