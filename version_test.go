package carryover

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// TestVersionAgrees: every file that states carryover's version states Version.
func TestVersionAgrees(t *testing.T) {
	read := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// firstMatch is the first submatch of re in path, or "" when there is none.
	firstMatch := func(path, re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindSubmatch(read(path))
		if m == nil {
			t.Errorf("%s: no version found (pattern %s)", path, re)
			return ""
		}
		return string(m[1])
	}
	var pkg struct {
		Version string `json:"version"`
		License string `json:"license"`
	}
	if err := json.Unmarshal(read("clients/js/package.json"), &pkg); err != nil {
		t.Fatalf("clients/js/package.json: %v", err)
	}
	var api struct {
		Info struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	if err := json.Unmarshal(read("server/httpapi/openapi.json"), &api); err != nil {
		t.Fatalf("server/httpapi/openapi.json: %v", err)
	}
	got := []struct{ file, version string }{
		{"clients/js/package.json", pkg.Version},
		{"clients/python/pyproject.toml", firstMatch("clients/python/pyproject.toml", `(?m)^version\s*=\s*"([^"]*)"`)},
		{"clients/python/src/carryover/__init__.py", firstMatch("clients/python/src/carryover/__init__.py", `(?m)^__version__\s*=\s*"([^"]*)"`)},
		{"server/httpapi/openapi.json (info.version)", api.Info.Version},
		{"CHANGELOG.md (the top release)", firstMatch("CHANGELOG.md", `(?m)^## v(\d+\.\d+\.\d+)\b`)},
	}
	for _, g := range got {
		if g.version != Version {
			t.Errorf("%s says version %q, carryover.Version is %q", g.file, g.version, Version)
		}
	}

	// One licence: LICENSE is MIT, and so are the clients' package files.
	if !regexp.MustCompile(`^MIT License\b`).Match(read("LICENSE")) {
		t.Error("LICENSE is not the MIT licence")
	}
	if pkg.License != "MIT" {
		t.Errorf("clients/js/package.json: license %q, want MIT", pkg.License)
	}
	if lic := firstMatch("clients/python/pyproject.toml", `(?m)^license\s*=\s*(.*)$`); lic != `{text = "MIT"}` && lic != `"MIT"` {
		t.Errorf("clients/python/pyproject.toml: license %s, want MIT", lic)
	}
}
