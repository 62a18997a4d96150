package server_test

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestMCPExportImport: export_session's archive imported by import_session is a new session with
// the state (and, with events, the source's event log; without, none of it); a damaged one is a tool error with the API's code, and another tenant cannot export.
func TestMCPExportImport(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	cs := mcpConnect(t, ts, "Bearer "+testToken, "")
	a := okTool(t, cs, "run_python", map[string]any{"code": "z = {'deep': [1, 2, 3]}"})
	id := a.out["session_id"].(string)
	a = okTool(t, cs, "export_session", map[string]any{"session_id": id})
	b64, _ := a.out["archive_base64"].(string)
	if b64 == "" || a.out["bytes"].(float64) == 0 {
		t.Fatalf("export_session: %+v", a.text)
	}
	a = okTool(t, cs, "import_session", map[string]any{"archive_base64": b64, "new_session_id": id + "-mcp"})
	if a.out["session_id"] != id+"-mcp" || a.out["source_session_id"] != id || a.out["events"] != float64(0) {
		t.Fatalf("import_session: %+v", a)
	}
	if a = okTool(t, cs, "run_python", map[string]any{"code": "z['deep'][2]", "session_id": id + "-mcp"}); a.out["result"] != "3" {
		t.Fatalf("the imported session: %+v", a)
	}
	a = okTool(t, cs, "export_session", map[string]any{"session_id": id, "events": true})
	src, err := ts.c.Events(t.Context(), id, 0, 0, "") // the log as the export read it
	if err != nil || len(src) < 2 {
		t.Fatalf("the source's log: %d events (%v)", len(src), err)
	}
	a = okTool(t, cs, "import_session", map[string]any{"archive_base64": a.out["archive_base64"], "new_session_id": id + "-ev"})
	if a.out["events"] != float64(len(src)) {
		t.Fatalf("import_session of an archive with events: %v events, want %d", a.out["events"], len(src))
	}
	got, err := ts.c.Events(t.Context(), id+"-ev", 0, 0, "")
	if err != nil || len(got) < len(src) {
		t.Fatalf("the new session's log: %d events (%v)", len(got), err)
	}
	for i, ev := range src {
		if g := got[len(got)-len(src)+i]; g.EventType != ev.EventType || !g.CreatedAt.Equal(ev.CreatedAt) {
			t.Fatalf("event %d came back as %s %s, want %s %s", i, g.EventType, g.CreatedAt, ev.EventType, ev.CreatedAt)
		}
	}
	raw, _ := base64.StdEncoding.DecodeString(b64)
	bad := base64.StdEncoding.EncodeToString(raw[:len(raw)/2])
	if a = callTool(t, cs, "import_session", map[string]any{"archive_base64": bad}); !a.isError || !strings.HasPrefix(a.text, "invalid_request: archive refused") {
		t.Fatalf("a truncated archive: %+v", a)
	}
}
