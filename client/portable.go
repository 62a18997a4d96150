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
	Events        int           `json:"events"` // events of the archive's log appended to the new session's
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
	return c.ExportSessionWith(ctx, id, ExportOptions{CheckpointID: checkpointID}, w)
}

// ExportOptions are an export's choices: the checkpoint ("" the session's current state) and
// whether the archive carries the session's event log (an archive of version 2).
type ExportOptions struct {
	CheckpointID string
	Events       bool
}

// ExportSessionWith is ExportSession with all its options.
func (c *Client) ExportSessionWith(ctx context.Context, id string, o ExportOptions, w io.Writer) error {
	q := url.Values{}
	if o.CheckpointID != "" {
		q.Set("checkpoint_id", o.CheckpointID)
	}
	if o.Events {
		q.Set("events", "true")
	}
	path := sessionPath(id, "export")
	if len(q) > 0 {
		path += "?" + q.Encode()
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
