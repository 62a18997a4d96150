package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"
)

// ImportResult is the answer of ImportSession: the new session, its checkpoint, where the archive
// was made, and what the import wrote.
type ImportResult struct {
	Session       Session       `json:"session"`
	CheckpointID  string        `json:"checkpoint_id"`
	Source        ArchiveSource `json:"source"`
	Chunks        int           `json:"chunks"`
	ChunksPresent int           `json:"chunks_present"` // already in the store: verified, not written again
	BytesWritten  int64         `json:"bytes_written"`
	Warnings      []string      `json:"warnings"`
}

// ArchiveSource says where an archive was made (docs/export-format.md, the index's "source").
type ArchiveSource struct {
	SessionID           string    `json:"session_id"`
	CheckpointID        string    `json:"checkpoint_id"`
	Turn                int       `json:"turn"`
	CheckpointCreatedAt time.Time `json:"checkpoint_created_at"`
	Workspace           string    `json:"workspace,omitempty"`
	ManifestFormat      int       `json:"manifest_format"`
}

// ExportSession streams the archive of session id (checkpointID one of its checkpoints; "" its
// current state) into w (docs/export-format.md). The archive is never held in memory.
func (c *Client) ExportSession(ctx context.Context, id, checkpointID string, w io.Writer) error {
	path := sessionPath(id, "export")
	if checkpointID != "" {
		path += "?checkpoint_id=" + url.QueryEscape(checkpointID)
	}
	return c.Do(ctx, http.MethodGet, path, nil, w)
}

// ImportSession sends an archive (read from r once, streamed) and answers the new session of the
// caller's tenant; sessionID names it ("" for a generated id).
func (c *Client) ImportSession(ctx context.Context, r io.Reader, sessionID string) (*ImportResult, error) {
	path := "/api/sessions/import"
	if sessionID != "" {
		path += "?session_id=" + url.QueryEscape(sessionID)
	}
	var out ImportResult
	if err := c.Do(ctx, http.MethodPost, path, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
