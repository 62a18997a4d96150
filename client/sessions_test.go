package client_test

import (
	"net/http"
	"testing"

	"github.com/carryover/carryover/client"
)

func TestSessionCRUD(t *testing.T) {
	ctx := testCtx(t)
	id := uniqueID(t)
	s := newSession(t, client.CreateRequest{SessionID: id, Data: map[string]any{"user_id": "123"},
		Budget: &client.Budget{IterationLimit: 100}, ClientID: "agent-" + id})
	if s.ID != id || s.State != client.StatePending || s.Data["user_id"] != "123" ||
		s.Budget.IterationLimit != 100 || s.Tenant != "default" || s.CreatedAt.IsZero() {
		t.Fatalf("created session: %+v", s)
	}
	got, err := api.GetSession(ctx, id)
	if err != nil || got.ID != id || got.ClientID != "agent-"+id {
		t.Fatalf("GetSession: %+v, %v", got, err)
	}
	list, err := api.ListSessions(ctx)
	if err != nil || !listed(list, id) {
		t.Fatalf("ListSessions: %d sessions, %v; %s missing", len(list), err, id)
	}
	p, err := api.PatchSession(ctx, id, map[string]any{"step": 2})
	if err != nil || p.Data["user_id"] != "123" || p.Data["step"] != float64(2) {
		t.Fatalf("PatchSession: %+v, %v", p.Data, err)
	}
	r, err := api.Reattach(ctx, "agent-"+id)
	if err != nil || r.ID != id {
		t.Fatalf("Reattach: %+v, %v", r, err)
	}
	if _, err := api.Heartbeat(ctx, id); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if err := api.DeleteSession(ctx, id); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	_, err = api.GetSession(ctx, id)
	wantAPIError(t, err, http.StatusNotFound, client.CodeNotFound)
}

func listed(list []client.Session, id string) bool {
	for _, s := range list {
		if s.ID == id {
			return true
		}
	}
	return false
}

func TestLifecycle(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{Start: true})
	if s.State != client.StateRunning {
		t.Fatalf("created with start: state %s", s.State)
	}
	if p, err := api.Pause(ctx, s.ID); err != nil || p.State != client.StatePaused {
		t.Fatalf("Pause: %v, %v", p, err)
	}
	_, err := api.Run(ctx, s.ID, client.RunRequest{Code: "1"})
	wantAPIError(t, err, http.StatusConflict, client.CodeSessionPaused)
	if r, err := api.Resume(ctx, s.ID); err != nil || r.State != client.StateRunning {
		t.Fatalf("Resume: %v, %v", r, err)
	}
	run(t, s.ID, "x = 1")
	st, err := api.Stop(ctx, s.ID, "done")
	if err != nil || st.State != client.StateCompleted || st.StopReason != "done" || st.LastCheckpoint == nil {
		t.Fatalf("Stop: %+v, %v", st, err)
	}
	_, err = api.Run(ctx, s.ID, client.RunRequest{Code: "1"})
	wantAPIError(t, err, http.StatusConflict, client.CodeSessionClosed)
}

func TestErrorsDecoded(t *testing.T) {
	ctx := testCtx(t)
	_, err := api.GetSession(ctx, "no-such-session")
	e := wantAPIError(t, err, http.StatusNotFound, client.CodeNotFound)
	if e.Message == "" || e.Details["session_id"] != "no-such-session" {
		t.Errorf("not_found error: %+v", e)
	}

	s := newSession(t, client.CreateRequest{})
	_, err = api.Run(ctx, s.ID, client.RunRequest{Code: "1", TimeoutSeconds: client.Seconds(-1)})
	e = wantAPIError(t, err, http.StatusBadRequest, client.CodeInvalidRequest)
	if e.Details["field"] != "timeout_seconds" {
		t.Errorf("invalid_request details: %+v", e.Details)
	}

	_, err = client.New(baseURL, "wrong").ListSessions(ctx)
	wantAPIError(t, err, http.StatusUnauthorized, client.CodeUnauthorized)

	err = api.Do(ctx, http.MethodGet, "/api/nothing-here", nil, nil)
	wantAPIError(t, err, http.StatusNotFound, client.CodeNotFound)
	if client.ErrorCode(nil) != "" {
		t.Error("ErrorCode(nil) is not empty")
	}
}
