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
	runBrowserTest(t, "ui.test.mjs", 12*time.Minute)
}

// TestBrowserDataScience runs web/e2e/datasci.test.mjs against a server of its own: Plotly and Altair
// charts drawn from their JSON types (points and bars counted, again after a reload), the chart XSS
// corpus (e2e/xss-charts.mjs), the script-only HTML note. It needs Debian's python3-plotly and
// python3-altair in the kernel (make deps).
func TestBrowserDataScience(t *testing.T) {
	t.Parallel()
	runBrowserTest(t, "datasci.test.mjs", 8*time.Minute)
}

// TestBrowserWidgets runs web/e2e/widgets.test.mjs against a server of its own: an interact slider
// moved to 13 comes back at 13, with its output "n = 13" and 13 in the kernel, after a kill -9 of
// the kernel, a page reload and a hibernation and wake (issue 37).
func TestBrowserWidgets(t *testing.T) {
	t.Parallel()
	runBrowserTest(t, "widgets.test.mjs", 5*time.Minute)
}

// runBrowserTest starts the real server (servertest.StartProcess) and runs node e2e/<script> against it
// in Debian's chromium; it skips only when chromium is absent outside CI.
func runBrowserTest(t *testing.T, script string, limit time.Duration) {
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
	srv := servertest.StartProcess(t, servertest.Options{Token: "e2e-token-0123456789", PreImport: true}) // the default config, as users run it
	base, token := srv.Base, srv.Token

	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	shots := filepath.Join(webDir, "e2e", "screenshots")
	cmd := exec.CommandContext(ctx, node, filepath.Join(webDir, "e2e", script))
	cmd.Dir = webDir
	cmd.Env = append(os.Environ(), "CARRYOVER_URL="+base, "CARRYOVER_TOKEN="+token, "SCREENSHOT_DIR="+shots)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	t.Logf("node e2e/%s:\n%s", script, out.String())
	if err != nil {
		t.Fatal(fmt.Errorf("the browser test %s failed: %w", script, err))
	}
}
