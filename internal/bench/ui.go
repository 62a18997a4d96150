package bench

// ui.go: the browser UI with long sessions. Real executions are made through the API (each a
// checkpointed turn, outputs of a few kinds), then web/e2e/bench-history.mjs opens each session in
// Debian's chromium and reports when its newest turns are on screen. The floor is a session of 40
// turns (the screenful the page draws first) measured in the same run: the ratio is what the length
// of the history costs. Targets: under 1 s for 2,000 executions and 1.5 s for 20,000.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// uiCells are the turns the long sessions repeat: text, a rich result, a stream and a table.
var uiCells = []string{
	"x = %d\nprint('turn', x)",
	"{'turn': %d, 'squares': [i * i for i in range(5)]}",
	"import pandas as pd\npd.DataFrame({'a': range(3), 'b': [%d, 2, 3]})",
	"for i in range(3): print(i, %d)",
}

type uiHistoryMarks struct {
	Session      string  `json:"session"`
	HistoryMs    float64 `json:"historyMs"`
	HistoryAllMs float64 `json:"historyAllMs"`
	FetchMs      float64 `json:"fetchMs"`
	Cells        int     `json:"cells"`
	Newest       string  `json:"newest"`
}

func benchUILongSessions(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	script := filepath.Join(env.Root, "web", "e2e", "bench-history.mjs")
	node, nerr := exec.LookPath("node")
	if _, err := os.Stat("/usr/bin/chromium"); err != nil || nerr != nil {
		return []benchRow{{Name: "newest turns on screen", Note: "skipped: needs node and /usr/bin/chromium (make deps)"}}, nil
	}
	if _, err := os.Stat(filepath.Join(env.Root, "web", "node_modules", "playwright-core")); err != nil {
		return []benchRow{{Name: "newest turns on screen", Note: "skipped: needs web/node_modules (make web-deps)"}}, nil
	}
	sizes := []int{40, 2000, 20000}
	if env.Quick {
		sizes = []int{40, 60}
	}
	h, err := startBenchSrv(ctx, env, "ui", nil)
	if err != nil {
		return nil, err
	}
	defer h.stop()
	ids, made, err := uiSessions(ctx, h, sizes)
	if err != nil {
		return nil, err
	}
	marks, err := uiLoad(ctx, h, node, script, ids)
	if err != nil {
		return nil, err
	}
	return uiRows(marks, ids, sizes, made)
}

// uiSessions makes a session per size with that many real executions, and how long each took.
func uiSessions(ctx context.Context, h *benchSrv, sizes []int) ([]string, []time.Duration, error) {
	ids := make([]string, len(sizes))
	made := make([]time.Duration, len(sizes))
	for i, n := range sizes {
		id, _, err := h.createSession(ctx)
		if err != nil {
			return nil, nil, err
		}
		ids[i] = id
		t0 := time.Now()
		for k := 1; k <= n; k++ {
			if _, _, err := h.run(ctx, id, fmt.Sprintf(uiCells[k%len(uiCells)], k)); err != nil {
				return nil, nil, fmt.Errorf("execution %d of %d: %w", k, n, err)
			}
		}
		made[i] = time.Since(t0)
	}
	return ids, made, nil
}

// uiLoad has bench-history.mjs open each session in chromium and returns its marks by session.
func uiLoad(ctx context.Context, h *benchSrv, node, script string, ids []string) (map[string]uiHistoryMarks, error) {
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CARRYOVER_URL="+h.base, "CARRYOVER_TOKEN="+h.token, "SESSIONS="+strings.Join(ids, ","), "RELOADS=5")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("node bench-history.mjs: %w\n%s", err, benchClip(stderr.String(), 2000))
	}
	marks := map[string]uiHistoryMarks{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m uiHistoryMarks
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Session != "" {
			marks[m.Session] = m
		}
	}
	if _, ok := marks[ids[0]]; !ok {
		return nil, fmt.Errorf("bench-history.mjs printed nothing for the floor session:\n%s", benchClip(out.String(), 2000))
	}
	return marks, nil
}

// uiRows are each long session's time to its newest turns on screen beside the floor's (the first
// size), with its target.
func uiRows(marks map[string]uiHistoryMarks, ids []string, sizes []int, made []time.Duration) ([]benchRow, error) {
	floor := marks[ids[0]]
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	var rows []benchRow
	for i, n := range sizes[1:] {
		m, ok := marks[ids[i+1]]
		if !ok {
			return rows, fmt.Errorf("no marks for the %d-execution session", n)
		}
		target := time.Second
		if n > 2000 {
			target = 1500 * time.Millisecond
		}
		verdict := "meets"
		if ms(m.HistoryMs) >= target {
			verdict = "MISSES"
		}
		rows = append(rows, benchRow{
			Name:  fmt.Sprintf("newest turns on screen, %d real executions (median of 5 loads)", n),
			Ours:  fmtDur(ms(m.HistoryMs)),
			Peer:  fmtDur(ms(floor.HistoryMs)) + " (40 turns)",
			Ratio: ratio(ms(m.HistoryMs), ms(floor.HistoryMs)),
			Note: fmt.Sprintf("%s target %s; ms since navigation start; GET /executions %s; first page (%d cells) drawn %s; %d executions made in %s",
				verdict, fmtDur(target), fmtDur(ms(m.FetchMs)), m.Cells, fmtDur(ms(m.HistoryAllMs)), n, made[i+1].Round(time.Second)),
		})
	}
	return rows, nil
}
