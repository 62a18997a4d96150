package web_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/servertest"
)

const chromium = "/usr/bin/chromium"

// TestBrowserUI builds the real server, starts it on a free port and runs web/e2e/ui.test.mjs in Debian's
// chromium through playwright-core: create a session, print and plot, reload and see the history,
// upload a file and read it from code, see the skipped-generator notice, an XSS corpus through the real
// rendering path, the variable inspector, checkpoint diff and fork, .ipynb in and out, axe-core on
// every panel, and more. Screenshots are
// saved to web/e2e/screenshots/ and their paths printed.
func TestBrowserUI(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s not installed (make deps installs it; in CI this test must run)", chromium)
		}
		t.Fatalf("%s is required in CI: %v", chromium, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the browser test: %v", err)
	}
	webDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is not installed: run `make web-deps` (cd web && npm install): %v", err)
	}
	srv := servertest.StartProcess(t, servertest.Options{Token: "e2e-token-0123456789"})
	base, token := srv.Base, srv.Token

	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	shots := filepath.Join(webDir, "e2e", "screenshots")
	cmd := exec.CommandContext(ctx, node, filepath.Join(webDir, "e2e", "ui.test.mjs"))
	cmd.Dir = webDir
	cmd.Env = append(os.Environ(), "CARRYOVER_URL="+base, "CARRYOVER_TOKEN="+token, "SCREENSHOT_DIR="+shots)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	t.Logf("node e2e/ui.test.mjs:\n%s", out.String())
	if err != nil {
		t.Fatal(fmt.Errorf("the browser test failed: %w", err))
	}
}
