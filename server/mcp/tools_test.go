package mcp

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A panicking tool is an internal tool error, and the server goes on answering.
func TestToolPanicIsAnInternalToolError(t *testing.T) {
	tl := &tools{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srv := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	add(tl, srv, &sdk.Tool{Name: "boom"}, func(context.Context, *sdk.CallToolRequest, sessionIn) (*sdk.CallToolResult, sessionIn, error) {
		panic("boom")
	})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 2 {
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "boom", Arguments: map[string]any{"session_id": "s"}})
		if err != nil {
			t.Fatalf("protocol error: %v", err)
		}
		if text := res.Content[0].(*sdk.TextContent).Text; !res.IsError || !strings.HasPrefix(text, "internal: ") {
			t.Fatalf("got isError %v %q", res.IsError, text)
		}
	}
}
