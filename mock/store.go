// Package mock holds small fakes of carryover's seams for unit tests (benbjohnson/wtf's mock
// package): an in-memory carryover.Store and a kernel.Provisioner whose commands are functions. They
// let the session service's logic be tested in milliseconds without SQLite, Python or a kernel; the
// behaviour of the real implementations is pinned by persistence/storetest and the end-to-end tests.
package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/carryover/carryover"
)

// Store is an in-memory carryover.Store for sessions, events, executions, tools, skills and keys. It keeps
// no checkpoints (they need the checkpoint engine and a kernel): lookups answer not found and
// BeginCheckpoint fails. A non-nil ...Fn field replaces the method of that name, so a test can make
// a write fail or observe it.
type Store struct {
	UpdateSessionFn   func(ctx context.Context, r carryover.SessionRecord) error
	AppendEventFn     func(ctx context.Context, sessionID, eventType string, payload any) (carryover.Event, error)
	InsertExecutionFn func(ctx context.Context, e carryover.Execution) (int64, error)
	// ListCheckpointsFn answers ListCheckpoints (the store keeps none itself): a test's checkpoints
	// as the store would list them.
	ListCheckpointsFn func(ctx context.Context, sessionID string) ([]carryover.Checkpoint, error)

	mu       sync.Mutex
	sessions map[string]carryover.SessionRecord
	events   map[string][]carryover.Event
	execs    map[string][]carryover.Execution
	tools    map[string][]carryover.Tool
	skills   map[string]map[string]skill // tenant -> path
	keys     map[string]carryover.APIKey // id -> key
	nextExec int64
	idem     idempotencyKeys // idempotency.go
}

type skill struct {
	file    carryover.SkillFile
	content []byte
}

var _ carryover.Store = (*Store)(nil)

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{
		sessions: map[string]carryover.SessionRecord{}, events: map[string][]carryover.Event{},
		execs: map[string][]carryover.Execution{}, tools: map[string][]carryover.Tool{},
		skills: map[string]map[string]skill{}, keys: map[string]carryover.APIKey{},
	}
}

func notFound(what, id string) error {
	return carryover.Errorf(carryover.CodeNotFound, "%s %q not found", what, id)
}

// CreateSession inserts r; conflict when the id is taken.
func (s *Store) CreateSession(_ context.Context, r carryover.SessionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[r.ID]; ok {
		return carryover.Errorf(carryover.CodeConflict, "session %q exists", r.ID)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	s.sessions[r.ID] = r
	return nil
}

// UpdateSession replaces the record of r.ID (UpdateSessionFn when set).
func (s *Store) UpdateSession(ctx context.Context, r carryover.SessionRecord) error {
	if s.UpdateSessionFn != nil {
		return s.UpdateSessionFn(ctx, r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.sessions[r.ID]
	if !ok {
		return notFound("session", r.ID)
	}
	r.CreatedAt = old.CreatedAt // an update never moves a session's creation, as in the real stores
	s.sessions[r.ID] = r
	return nil
}

// GetSession returns one record.
func (s *Store) GetSession(_ context.Context, id string) (carryover.SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[id]
	if !ok {
		return r, notFound("session", id)
	}
	return r, nil
}

// ListSessions returns every record, oldest first.
func (s *Store) ListSessions(context.Context) ([]carryover.SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]carryover.SessionRecord, 0, len(s.sessions))
	for _, r := range s.sessions {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// DeleteSession removes the session and what was recorded for it.
func (s *Store) DeleteSession(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[id]; !ok {
		return notFound("session", id)
	}
	delete(s.sessions, id)
	delete(s.events, id)
	delete(s.execs, id)
	delete(s.tools, id)
	s.idem.drop(id)
	return nil
}

// AppendEvent appends an event numbered 1, 2, 3... per session (AppendEventFn when set).
func (s *Store) AppendEvent(ctx context.Context, sessionID, eventType string, payload any) (carryover.Event, error) {
	if s.AppendEventFn != nil {
		return s.AppendEventFn(ctx, sessionID, eventType, payload)
	}
	var raw json.RawMessage
	switch p := payload.(type) {
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		b, err := json.Marshal(payload)
		if err != nil {
			return carryover.Event{}, err
		}
		raw = b
	}
	if !json.Valid(raw) { // the real stores keep payloads as JSON and refuse what is not
		return carryover.Event{}, fmt.Errorf("event %s of session %q: payload is not valid JSON", eventType, sessionID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sessionID]; !ok {
		return carryover.Event{}, notFound("session", sessionID)
	}
	ev := carryover.Event{SessionID: sessionID, SequenceNumber: int64(len(s.events[sessionID]) + 1),
		EventType: eventType, Payload: raw, CreatedAt: time.Now().UTC()}
	s.events[sessionID] = append(s.events[sessionID], ev)
	return ev, nil
}

// ListEvents returns the events q selects (carryover.EventQuery).
func (s *Store) ListEvents(_ context.Context, sessionID string, q carryover.EventQuery) ([]carryover.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := slices.Clone(s.events[sessionID])
	if q.Newest {
		slices.Reverse(all)
	}
	out := []carryover.Event{}
	for _, ev := range all {
		if ev.SequenceNumber <= q.After || (q.Before > 0 && ev.SequenceNumber >= q.Before) || (q.Type != "" && ev.EventType != q.Type) {
			continue
		}
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
		out = append(out, ev)
	}
	return out, nil
}

// EventTypes lists the types of a session's events in order (a test helper).
func (s *Store) EventTypes(sessionID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, ev := range s.events[sessionID] {
		out = append(out, ev.EventType)
	}
	return out
}

// InsertExecution records e (InsertExecutionFn when set).
func (s *Store) InsertExecution(ctx context.Context, e carryover.Execution) (int64, error) {
	if s.InsertExecutionFn != nil {
		return s.InsertExecutionFn(ctx, e)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[e.SessionID]; !ok {
		return 0, notFound("session", e.SessionID)
	}
	s.nextExec++
	e.ID = s.nextExec
	if e.StartedAt.IsZero() {
		e.StartedAt = time.Now().UTC()
	}
	s.execs[e.SessionID] = append(s.execs[e.SessionID], e)
	return e.ID, nil
}

// ListExecutions returns the newest limit executions (all when limit <= 0), oldest first.
func (s *Store) ListExecutions(_ context.Context, sessionID string, limit int) ([]carryover.Execution, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.execs[sessionID]
	if limit > 0 && len(all) > limit {
		all = all[len(all)-limit:]
	}
	return append([]carryover.Execution{}, all...), nil
}

// PutTool inserts or replaces a tool, keeping the first registration's created_at and place.
func (s *Store) PutTool(_ context.Context, t carryover.Tool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[t.SessionID]; !ok {
		return notFound("session", t.SessionID)
	}
	ts := s.tools[t.SessionID]
	for i := range ts {
		if ts[i].Name == t.Name {
			t.CreatedAt = ts[i].CreatedAt
			ts[i] = t
			return nil
		}
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now().UTC()
	}
	s.tools[t.SessionID] = append(ts, t)
	return nil
}

// ListTools returns the session's tools in registration order.
func (s *Store) ListTools(_ context.Context, sessionID string) ([]carryover.Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]carryover.Tool{}, s.tools[sessionID]...), nil
}

// ListSkills returns the tenant's skill files by path.
func (s *Store) ListSkills(_ context.Context, tenant string) ([]carryover.SkillFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []carryover.SkillFile{}
	for _, f := range s.skills[tenant] {
		out = append(out, f.file)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// GetSkill returns one skill file and its content.
func (s *Store) GetSkill(_ context.Context, tenant, path string) (carryover.SkillFile, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.skills[tenant][path]
	if !ok {
		return carryover.SkillFile{}, nil, notFound("skill", path)
	}
	return f.file, append([]byte{}, f.content...), nil // an empty file is empty content, not nil
}

// PutSkill creates or replaces a skill file.
func (s *Store) PutSkill(_ context.Context, tenant, path string, content []byte) (carryover.SkillFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skills[tenant] == nil {
		s.skills[tenant] = map[string]skill{}
	}
	f := carryover.SkillFile{Tenant: tenant, Path: path, Size: int64(len(content)),
		Hash: carryover.SkillHash(content), UpdatedAt: time.Now().UTC()}
	s.skills[tenant][path] = skill{file: f, content: append([]byte(nil), content...)}
	return f, nil
}

// DeleteSkill removes a skill file.
func (s *Store) DeleteSkill(_ context.Context, tenant, path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.skills[tenant][path]; !ok {
		return notFound("skill", path)
	}
	delete(s.skills[tenant], path)
	return nil
}

// errNoCheckpoints answers what would write checkpoints: this store keeps none.
var errNoCheckpoints = errors.New("mock: the mock store keeps no checkpoints")

// ReadChunk: no chunk is stored.
func (s *Store) ReadChunk(_ context.Context, hash string, _ []byte) ([]byte, error) {
	return nil, notFound("chunk", hash)
}

// ReadChunkTo: no chunk is stored.
func (s *Store) ReadChunkTo(_ context.Context, hash string, _ io.Writer) (int64, error) {
	return 0, notFound("chunk", hash)
}

// MissingChunks: every chunk is missing.
func (s *Store) MissingChunks(_ context.Context, hashes []string) ([]string, error) {
	return append([]string(nil), hashes...), nil
}

// BeginCheckpoint fails: this store keeps no checkpoints.
func (s *Store) BeginCheckpoint(context.Context) (carryover.CheckpointWriter, error) {
	return nil, errNoCheckpoints
}

// GetCheckpoint: none.
func (s *Store) GetCheckpoint(_ context.Context, _, id string) (carryover.Checkpoint, error) {
	return carryover.Checkpoint{}, notFound("checkpoint", id)
}

// LatestCheckpoint: none.
func (s *Store) LatestCheckpoint(_ context.Context, sessionID string) (carryover.Checkpoint, error) {
	return carryover.Checkpoint{}, notFound("checkpoint of session", sessionID)
}

// ListCheckpoints: none, or ListCheckpointsFn's.
func (s *Store) ListCheckpoints(ctx context.Context, sessionID string) ([]carryover.Checkpoint, error) {
	if s.ListCheckpointsFn != nil {
		return s.ListCheckpointsFn(ctx, sessionID)
	}
	return []carryover.Checkpoint{}, nil
}

// Prune: nothing to prune.
func (s *Store) Prune(context.Context, string, int) (int, error) { return 0, nil }

// GC: nothing to collect.
func (s *Store) GC(context.Context) (int, int64, error) { return 0, 0, nil }

// Close does nothing.
func (s *Store) Close() error { return nil }
