package server_test

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestMCPExportImport: export_session's archive imported by import_session is a new session with
// the state; a damaged one is a tool error with the API's code, and another tenant cannot export.
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
	if a.out["session_id"] != id+"-mcp" || a.out["source_session_id"] != id {
		t.Fatalf("import_session: %+v", a)
	}
	if a = okTool(t, cs, "run_python", map[string]any{"code": "z['deep'][2]", "session_id": id + "-mcp"}); a.out["result"] != "3" {
		t.Fatalf("the imported session: %+v", a)
	}
	raw, _ := base64.StdEncoding.DecodeString(b64)
	bad := base64.StdEncoding.EncodeToString(raw[:len(raw)/2])
	if a = callTool(t, cs, "import_session", map[string]any{"archive_base64": bad}); !a.isError || !strings.HasPrefix(a.text, "invalid_request: archive refused") {
		t.Fatalf("a truncated archive: %+v", a)
	}
}
