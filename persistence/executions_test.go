package persistence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

func TestExecutions(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	at := time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC)
	for i := 1; i <= 5; i++ {
		id, err := s.InsertExecution(ctx, carryover.Execution{SessionID: "a", ExecutionCount: i, Kind: "run", Code: "x", Status: "ok",
			Result: []byte(`{"ok":true}`), StartedAt: at, DurationMS: 1.5})
		if err != nil || id <= 0 {
			t.Fatalf("insert %d: id %d err %v", i, id, err)
		}
	}
	if _, err := s.InsertExecution(ctx, carryover.Execution{SessionID: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("insert for missing session: %v", err)
	}
	last, err := s.ListExecutions(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 2 || last[0].ExecutionCount != 4 || last[1].ExecutionCount != 5 {
		t.Fatalf("last 2: %+v", last)
	}
	e := last[1]
	if string(e.Result) != `{"ok":true}` || !e.StartedAt.Equal(at) || e.DurationMS != 1.5 || e.SessionID != "a" {
		t.Fatalf("round trip: %+v", e)
	}
	all, _ := s.ListExecutions(ctx, "a", 0)
	if len(all) != 5 || all[0].ExecutionCount != 1 {
		t.Fatalf("all: %d", len(all))
	}
}

func TestToolsUpsert(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.PutTool(ctx, carryover.Tool{SessionID: "a", Name: "zeta", ToolType: "function", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTool(ctx, carryover.Tool{SessionID: "a", Name: "alpha", ToolType: "function", CreatedAt: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTool(ctx, carryover.Tool{SessionID: "a", Name: "zeta", ToolType: "mcp", Description: "v2",
		InputSchema: []byte(`{"type":"object"}`), CreatedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTool(ctx, carryover.Tool{SessionID: "nope", Name: "x"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tool for missing session: %v", err)
	}
	tools, err := s.ListTools(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "zeta" || tools[1].Name != "alpha" {
		t.Fatalf("tools %+v", tools)
	}
	z := tools[0]
	if z.ToolType != "mcp" || z.Description != "v2" || string(z.InputSchema) != `{"type":"object"}` || !z.CreatedAt.Equal(t0) {
		t.Fatalf("upserted tool %+v", z)
	}
}
