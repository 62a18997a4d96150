package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/servertest"
)

// testCtx bounds one test's calls.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSession creates a session named for the test, deleted when the test ends.
func newSession(t *testing.T, req client.CreateRequest) *client.Session {
	t.Helper()
	if req.Name == "" {
		req.Name = t.Name()
	}
	s, err := api.CreateSession(testCtx(t), req)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	t.Cleanup(func() {
		err := api.DeleteSession(context.Background(), s.ID)
		if err != nil && client.ErrorCode(err) != client.CodeNotFound {
			t.Errorf("DeleteSession(%s): %v", s.ID, err)
		}
	})
	return s
}

// run runs code that must succeed (status ok) and returns the answer.
func run(t *testing.T, id, code string) *client.RunResult {
	t.Helper()
	res, err := api.Run(testCtx(t), id, client.RunRequest{Code: code})
	if err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	if res.Status != client.StatusOK {
		t.Fatalf("Run(%q): status %s, error %+v", code, res.Status, res.Error)
	}
	return res
}

// resultOf is the text/plain result of a run ("" when none).
func resultOf(r *client.RunResult) string {
	if r.Result == nil {
		return ""
	}
	return *r.Result
}

// wantAPIError checks that err is an *client.Error with that status and code.
func wantAPIError(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v (%T), want *client.Error %d %s", err, err, status, code)
	}
	if e.Status != status || e.Code != code || client.ErrorCode(err) != code {
		t.Fatalf("got %d %s (%q), want %d %s", e.Status, e.Code, e.Message, status, code)
	}
	return e
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// uniqueID is a session id unique to the test and the run.
func uniqueID(t *testing.T) string { return servertest.ID(t) }
