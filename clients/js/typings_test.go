package js_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTypingsGenerated fails when the generated part of index.d.ts (the Schemas namespace: every
// schema of server/httpapi/openapi.json, and each operation's answer and body) is not what the
// spec gives now. Fix: node clients/js/tools/gen-types.mjs. No server, no npm package.
func TestTypingsGenerated(t *testing.T) {
	node := lookNode(t)
	out, err := exec.Command(node, "tools/gen-types.mjs", "--check").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestTypingsCompile compiles index.d.ts and typecheck/types-test.ts (uses of every method, which
// must get the spec's types) with the TypeScript pinned in typecheck/package-lock.json, strict. It
// installs that TypeScript itself (npm ci in typecheck/) when it is missing or not the locked one.
func TestTypingsCompile(t *testing.T) {
	node := lookNode(t)
	dir := filepath.Join("typecheck")
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	stamp := filepath.Join(dir, "node_modules", ".carryover-lock")
	if have, err := os.ReadFile(stamp); err != nil || !bytes.Equal(have, lock) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatalf("npm is needed to install the pinned TypeScript (or run: cd clients/js/typecheck && npm ci): %v", err)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--silent")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in clients/js/typecheck: %v\n%s", err, out)
		}
		if err := os.WriteFile(stamp, lock, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc -p clients/js/typecheck: %v\n%s", err, out)
	}
}

func lookNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the Node client's tests (every machine of this project has it): %v", err)
	}
	return node
}
