package servertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// DriveThroughKills runs a client library's restart driver (argv: interpreter and script; the
// Python SDK's and the Node client's testdata/restart_driver.*) against p and kills p with -9
// twice: while turn slow's cell runs, and right after turn between. The driver's protocol: argv
// BASE TOKEN SESSION N SLOW; it prints "turn I" before turn I, "done I" after it, "interrupted I"
// when its library answered run_interrupted, and "L <json>" (the list every turn appended its
// number to) at the end. The list must be 0..n-1 (no turn lost, none run twice), and the turn
// killed mid-cell must have been answered run_interrupted (not run again by the server).
func DriveThroughKills(t *testing.T, p *Process, id string, n, slow, between int, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := append(argv[1:], p.Base, p.Token, id, fmt.Sprint(n), fmt.Sprint(slow))
	cmd := exec.CommandContext(ctx, argv[0], args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(p.Dir, "data", "workspaces", id, fmt.Sprintf("started-%d", slow))
	var lines []string
	var list []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		switch {
		case line == fmt.Sprintf("turn %d", slow):
			for { // the cell runs: kill the server under it
				if _, err := os.Stat(started); err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("turn %d's cell never started", slow)
				}
				time.Sleep(20 * time.Millisecond)
			}
			p.Kill9()
			p.Restart(t)
		case line == fmt.Sprintf("done %d", between):
			p.Kill9()
			time.Sleep(300 * time.Millisecond) // the next run meets a refused connection
			p.Restart(t)
		case strings.HasPrefix(line, "L "):
			if err := json.Unmarshal([]byte(line[2:]), &list); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("driver failed: %v\nstdout:\n%s\nstderr:\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(list, want) {
		t.Fatalf("the list is %v, want %v (a turn lost or run twice)\ndriver:\n%s", list, want, strings.Join(lines, "\n"))
	}
	if !slices.Contains(lines, fmt.Sprintf("interrupted %d", slow)) {
		t.Fatalf("the turn killed mid-cell was not answered run_interrupted\ndriver:\n%s", strings.Join(lines, "\n"))
	}
	t.Logf("driver:\n%s", strings.Join(lines, "\n"))
}
