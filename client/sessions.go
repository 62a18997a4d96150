package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// sessionAnswer is the {"session": Session} envelope most session endpoints answer with.
type sessionAnswer struct {
	Session Session `json:"session"`
}

// sessionsAnswer is the answer of GET /api/sessions.
type sessionsAnswer struct {
	Sessions   []Session `json:"sessions"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// SessionPage asks GET /api/sessions for one page: Limit sessions (1..1000) after Cursor (the
// NextCursor of the page before; "" for the first), the newest first when Newest.
type SessionPage struct {
	Limit  int
	Cursor string
	Newest bool
}

// ListSessionsPage lists one page of the token's tenant's sessions, and the cursor of the next
// page ("" when this one is the last).
func (c *Client) ListSessionsPage(ctx context.Context, p SessionPage) ([]Session, string, error) {
	q := url.Values{}
	q.Set("limit", strconv.Itoa(p.Limit))
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	if p.Newest {
		q.Set("order", "desc")
	}
	var out sessionsAnswer
	if err := c.Do(ctx, http.MethodGet, "/api/sessions?"+q.Encode(), nil, &out); err != nil {
		return nil, "", err
	}
	return out.Sessions, out.NextCursor, nil
}

// The bodies of PATCH /api/sessions/{id}, POST /api/sessions/reattach, and stop and cancel.
type (
	patchSessionRequest struct {
		Data map[string]any `json:"data"`
	}
	reattachRequest struct {
		ClientID string `json:"client_id"`
	}
	reasonRequest struct {
		Reason string `json:"reason,omitempty"`
	}
)

// sessionCall sends one request whose answer is {"session": ...}.
func (c *Client) sessionCall(ctx context.Context, method, path string, body any) (*Session, error) {
	var out sessionAnswer
	if err := c.Do(ctx, method, path, body, &out); err != nil {
		return nil, err
	}
	return &out.Session, nil
}

// CreateSession creates a session (POST /api/sessions).
func (c *Client) CreateSession(ctx context.Context, req CreateRequest) (*Session, error) {
	return c.sessionCall(ctx, http.MethodPost, "/api/sessions", req)
}

// ListSessions lists the token's tenant's sessions.
func (c *Client) ListSessions(ctx context.Context) ([]Session, error) {
	var out sessionsAnswer
	if err := c.Do(ctx, http.MethodGet, "/api/sessions", nil, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// GetSession fetches one session.
func (c *Client) GetSession(ctx context.Context, id string) (*Session, error) {
	return c.sessionCall(ctx, http.MethodGet, sessionPath(id), nil)
}

// PatchSession merges data into the session's data.
func (c *Client) PatchSession(ctx context.Context, id string, data map[string]any) (*Session, error) {
	return c.sessionCall(ctx, http.MethodPatch, sessionPath(id), patchSessionRequest{Data: data})
}

// DeleteSession stops the session's kernel and removes everything it had.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, sessionPath(id), nil, nil)
}

// Reattach finds the session of a client id (an agent that restarted finds its session again).
func (c *Client) Reattach(ctx context.Context, clientID string) (*Session, error) {
	return c.sessionCall(ctx, http.MethodPost, "/api/sessions/reattach", reattachRequest{ClientID: clientID})
}

// action posts to /api/sessions/{id}/{name} and returns the session it answers with.
func (c *Client) action(ctx context.Context, id, name string, body any) (*Session, error) {
	return c.sessionCall(ctx, http.MethodPost, sessionPath(id, name), body)
}

// Start moves a pending session to running (a run or exec also does).
func (c *Client) Start(ctx context.Context, id string) (*Session, error) {
	return c.action(ctx, id, "start", nil)
}

// Pause pauses a running session: runs and execs answer session_paused until Resume.
func (c *Client) Pause(ctx context.Context, id string) (*Session, error) {
	return c.action(ctx, id, "pause", nil)
}

// Resume resumes a paused session.
func (c *Client) Resume(ctx context.Context, id string) (*Session, error) {
	return c.action(ctx, id, "resume", nil)
}

// Stop completes the session after a final checkpoint.
func (c *Client) Stop(ctx context.Context, id, reason string) (*Session, error) {
	return c.action(ctx, id, "stop", reasonBody(reason))
}

// Cancel force-ends the session (cancelled).
func (c *Client) Cancel(ctx context.Context, id, reason string) (*Session, error) {
	return c.action(ctx, id, "cancel", reasonBody(reason))
}

func reasonBody(reason string) any {
	if reason == "" {
		return nil
	}
	return reasonRequest{Reason: reason}
}

// Heartbeat tells the server the client is alive (it counts as activity for the idle culler).
func (c *Client) Heartbeat(ctx context.Context, id string) (*Session, error) {
	return c.action(ctx, id, "heartbeat", nil)
}

// Interrupt interrupts the session's running code (KeyboardInterrupt in the kernel).
func (c *Client) Interrupt(ctx context.Context, id string) (*Session, error) {
	return c.action(ctx, id, "interrupt", nil)
}

// Restart replaces the kernel with a new one restored from the last checkpoint.
func (c *Client) Restart(ctx context.Context, id string) (*Session, error) {
	return c.action(ctx, id, "restart", nil)
}

// Rotate forces a rotation (a new sandbox with the session's state).
func (c *Client) Rotate(ctx context.Context, id string) (*Session, error) {
	return c.action(ctx, id, "rotate", nil)
}

// Hibernate checkpoints the session and stops its kernel now; the next run wakes it.
func (c *Client) Hibernate(ctx context.Context, id string) (*Session, error) {
	return c.action(ctx, id, "hibernate", nil)
}

// PatchContext replaces the given agent context keys and applies them to the live kernel.
func (c *Client) PatchContext(ctx context.Context, id string, req ContextRequest) (*Session, error) {
	return c.sessionCall(ctx, http.MethodPatch, sessionPath(id, "context"), req)
}

// ForkRequest is the body of Fork and ForkMany; every field is optional.
type ForkRequest struct {
	SessionID    string `json:"session_id,omitempty"`    // the new session's id (with Count > 1, the children's prefix: ID-1 .. ID-N); generated when empty
	CheckpointID string `json:"checkpoint_id,omitempty"` // the source checkpoint; empty: the latest (taken now when the source has a live kernel)
	Count        int    `json:"count,omitempty"`         // how many children, 1..100 (0: one); all or none
}

// forkAnswer is the answer of POST /api/sessions/{id}/fork.
type forkAnswer struct {
	Session  Session   `json:"session"`  // the first child
	Sessions []Session `json:"sessions"` // every child, in order
}

// Fork makes a new session holding the namespace and files of a checkpoint of session id
// (POST /api/sessions/{id}/fork). The two share the checkpoint's chunks and are independent
// afterwards. With req.Count above 1 it answers the first child; ForkMany answers them all.
func (c *Client) Fork(ctx context.Context, id string, req ForkRequest) (*Session, error) {
	return c.action(ctx, id, "fork", req)
}

// ForkMany makes req.Count children (1..100) of one checkpoint of session id and answers them all,
// in order. It is all or none: over the tenant's sessions quota (429 quota_exceeded), a bad count
// (400) or a taken id (409), no session is made.
func (c *Client) ForkMany(ctx context.Context, id string, req ForkRequest) ([]Session, error) {
	var a forkAnswer
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "fork"), req, &a); err != nil {
		return nil, err
	}
	return a.Sessions, nil
}

// Notebook downloads the session's history as an nbformat 4.5 notebook (.ipynb JSON).
func (c *Client) Notebook(ctx context.Context, id string) ([]byte, error) {
	var data []byte
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "notebook"), nil, &data); err != nil {
		return nil, err
	}
	return data, nil
}

// NotebookRun is the answer of RunNotebook: each code cell's run answer (or why it did not run).
type NotebookRun struct {
	Cells     []NotebookCellRun `json:"cells"`
	Ran       int               `json:"ran"`
	StoppedAt *int              `json:"stopped_at,omitempty"`
}

// NotebookCellRun is one code cell's outcome; Index is its place among the notebook's cells.
type NotebookCellRun struct {
	Index  int        `json:"index"`
	Result *RunResult `json:"result,omitempty"`
	Error  *ErrorBody `json:"error,omitempty"`
}

// RunNotebook runs the code cells of an .ipynb (nbformat 4) into the session in order, stopping at
// the first failing cell unless continueOnError.
func (c *Client) RunNotebook(ctx context.Context, id string, notebook []byte, continueOnError bool) (*NotebookRun, error) {
	path := sessionPath(id, "notebook")
	if continueOnError {
		path += "?continue_on_error=true"
	}
	var out NotebookRun
	if err := c.Do(ctx, http.MethodPost, path, notebook, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
