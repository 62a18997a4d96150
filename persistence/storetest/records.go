package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// testExecutions: inserts get ids, listing gives the newest limit oldest first, a missing session is
// not found.
func testExecutions(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	at := time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC)
	var last int64
	for i := 1; i <= 5; i++ {
		id, err := s.InsertExecution(ctx, carryover.Execution{SessionID: "a", ExecutionCount: i, Kind: "run", Code: "x", Status: "ok",
			Result: []byte(`{"ok":true}`), StartedAt: at, DurationMS: 1.5})
		if err != nil || id <= last {
			t.Fatalf("insert %d: id %d (previous %d) err %v", i, id, last, err)
		}
		last = id
	}
	_, err := s.InsertExecution(ctx, carryover.Execution{SessionID: "nope", Kind: "run", Status: "ok"})
	wantCode(t, "insert for a missing session", err, carryover.CodeNotFound)
	newest, err := s.ListExecutions(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(newest) != 2 || newest[0].ExecutionCount != 4 || newest[1].ExecutionCount != 5 {
		t.Fatalf("newest 2: %+v", newest)
	}
	e := newest[1]
	if string(e.Result) != `{"ok":true}` || !e.StartedAt.Equal(at) || e.DurationMS != 1.5 || e.SessionID != "a" || e.Kind != "run" || e.ID != last {
		t.Fatalf("round trip: %+v", e)
	}
	if all, _ := s.ListExecutions(ctx, "a", 0); len(all) != 5 || all[0].ExecutionCount != 1 {
		t.Fatalf("all: %+v", all)
	}
	if none, err := s.ListExecutions(ctx, "unknown", 10); err != nil || len(none) != 0 {
		t.Fatalf("executions of an unknown session: %+v %v", none, err)
	}
}

// testTools: a replaced tool keeps its place (created_at) and takes the new fields.
func testTools(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(tool carryover.Tool) {
		t.Helper()
		if err := s.PutTool(ctx, tool); err != nil {
			t.Fatal(err)
		}
	}
	put(carryover.Tool{SessionID: "a", Name: "zeta", ToolType: "function", CreatedAt: t0})
	put(carryover.Tool{SessionID: "a", Name: "alpha", ToolType: "function", CreatedAt: t0.Add(time.Second)})
	put(carryover.Tool{SessionID: "a", Name: "zeta", ToolType: "mcp", Description: "v2",
		InputSchema: []byte(`{"type":"object"}`), CreatedAt: t0.Add(time.Hour)})
	wantCode(t, "tool of a missing session", s.PutTool(ctx, carryover.Tool{SessionID: "nope", Name: "x"}), carryover.CodeNotFound)
	tools, err := s.ListTools(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "zeta" || tools[1].Name != "alpha" {
		t.Fatalf("tools %+v, want zeta then alpha (registration order)", tools)
	}
	z := tools[0]
	if z.ToolType != "mcp" || z.Description != "v2" || string(z.InputSchema) != `{"type":"object"}` || !z.CreatedAt.Equal(t0) {
		t.Fatalf("replaced tool %+v", z)
	}
}
