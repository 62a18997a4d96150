package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Event is an entry of a session's append-only event log.
type Event struct {
	SequenceNumber int64           `json:"sequence_number"`
	EventType      string          `json:"event_type"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      time.Time       `json:"created_at"`
}

// Execution is a recorded run or shell command (the UI's history).
type Execution struct {
	SessionID      string          `json:"session_id"`
	ExecutionCount int             `json:"execution_count"`
	Kind           string          `json:"kind"` // run|exec
	Code           string          `json:"code"` // the code, or the command
	Status         string          `json:"status"`
	Result         json.RawMessage `json:"result"` // the full answer: a RunResult or an ExecResult
	StartedAt      time.Time       `json:"started_at"`
	DurationMS     float64         `json:"duration_ms"`
}

// RunResult decodes Result of a "run" execution.
func (e Execution) RunResult() (*RunResult, error) {
	var r RunResult
	if err := json.Unmarshal(e.Result, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ExecResult decodes Result of an "exec" execution.
func (e Execution) ExecResult() (*ExecResult, error) {
	var r ExecResult
	if err := json.Unmarshal(e.Result, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Tool is an entry of a session's tool registry.
type Tool struct {
	Name        string          `json:"name"`
	ToolType    string          `json:"tool_type"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	CreatedAt   time.Time       `json:"created_at"`
}

// ToolRequest registers a tool. InputSchema is any JSON value (a map, a json.RawMessage, ...)
// holding a JSON Schema; ToolType "" means "custom".
type ToolRequest struct {
	Name        string `json:"name"`
	ToolType    string `json:"tool_type,omitempty"`
	Description string `json:"description,omitempty"`
	InputSchema any    `json:"input_schema,omitempty"`
}

// The answers of the events, executions and tools endpoints.
type (
	eventsAnswer struct {
		Events []Event `json:"events"`
	}
	executionsAnswer struct {
		Executions []Execution `json:"executions"`
	}
	toolAnswer struct {
		Tool Tool `json:"tool"`
	}
	toolsAnswer struct {
		Tools []Tool `json:"tools"`
	}
)

// Events lists the session's events after sequence number after, at most limit of them (0: the
// server's default, 50), only those of eventType unless it is "".
func (c *Client) Events(ctx context.Context, id string, after int64, limit int, eventType string) ([]Event, error) {
	return c.EventsWhere(ctx, id, EventsQuery{After: after, Limit: limit, Type: eventType})
}

// EventsQuery is what EventsWhere asks GET .../events for.
type EventsQuery struct {
	After, Before int64  // after_sequence, before_sequence (0: no bound)
	Limit         int    // 0: the server's default (50); at most 1,000
	Type          string // only events of this type, unless ""
	Newest        bool   // order=desc: the newest first, Limit counted from them
}

// EventsWhere lists the session's events that q selects: EventsQuery{Newest: true, Limit: 50} is
// the end of the log; its oldest event's sequence number as Before pages back from there.
func (c *Client) EventsWhere(ctx context.Context, id string, eq EventsQuery) ([]Event, error) {
	q := url.Values{}
	q.Set("after_sequence", strconv.FormatInt(eq.After, 10))
	if eq.Before > 0 {
		q.Set("before_sequence", strconv.FormatInt(eq.Before, 10))
	}
	if eq.Limit > 0 {
		q.Set("limit", strconv.Itoa(eq.Limit))
	}
	if eq.Type != "" {
		q.Set("event_type", eq.Type)
	}
	if eq.Newest {
		q.Set("order", "desc")
	}
	var out eventsAnswer
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "events")+"?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// Executions lists the session's recorded runs and commands, oldest first; limit 0 takes the
// server's default (200).
func (c *Client) Executions(ctx context.Context, id string, limit int) ([]Execution, error) {
	p := sessionPath(id, "executions")
	if limit > 0 {
		p += "?limit=" + strconv.Itoa(limit)
	}
	var out executionsAnswer
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return out.Executions, nil
}

// RegisterTool adds a tool to the session's registry.
func (c *Client) RegisterTool(ctx context.Context, id string, req ToolRequest) (*Tool, error) {
	var out toolAnswer
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "tools"), req, &out); err != nil {
		return nil, err
	}
	return &out.Tool, nil
}

// Tools lists the session's registered tools.
func (c *Client) Tools(ctx context.Context, id string) ([]Tool, error) {
	var out toolsAnswer
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "tools"), nil, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}
