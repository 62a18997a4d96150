package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/carryover/carryover/client"
)

// A runner runs a turn's code on a session as one kind of client does: the Go client itself, or a
// driver process over the Python or the Node client (testdata/chaos_driver.*), each with its own
// idempotency key and retries. The harness checks every session through the Go client whichever
// runner drives it: the check observes, the runner is the user.
type runner interface {
	name() string
	run(ctx context.Context, sid, code string) (*client.RunResult, error)
}

type goRunner struct{ c *client.Client }

func (g goRunner) name() string { return "go" }

func (g goRunner) run(ctx context.Context, sid, code string) (*client.RunResult, error) {
	return g.c.Run(ctx, sid, client.RunRequest{Code: code})
}

// procRunner is a driver process: one JSON request a line on its stdin, one answer a line out.
type procRunner struct {
	kind string
	argv []string

	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// driverAnswer is a driver's line: a run's answer, or its error's code and text.
type driverAnswer struct {
	Status          string   `json:"status"`
	Stdout          string   `json:"stdout"`
	CheckpointError string   `json:"checkpoint_error"`
	FilesAhead      []string `json:"files_ahead"`
	Code            string   `json:"code"`
	Error           string   `json:"error"`
}

func (p *procRunner) name() string { return p.kind }

// start (re)starts the driver process.
func (p *procRunner) start() error {
	if p.cmd != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
	p.cmd = exec.Command(p.argv[0], p.argv[1:]...)
	p.cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	p.cmd.Stderr = os.Stderr
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p.out = bufio.NewScanner(out)
	p.out.Buffer(make([]byte, 1<<20), 1<<20)
	return p.cmd.Start()
}

// run sends one request and waits for its answer; past ctx's deadline the driver is restarted (its
// late answer must not be read as the next one's) and the deadline returned.
func (p *procRunner) run(ctx context.Context, sid, code string) (*client.RunResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	req, _ := json.Marshal(map[string]string{"sid": sid, "code": code})
	if _, err := p.in.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("%s driver: %w", p.kind, err)
	}
	line, sc := make(chan []byte, 1), p.out
	go func() {
		if sc.Scan() {
			line <- sc.Bytes()
		}
		close(line)
	}()
	var b []byte
	select {
	case <-ctx.Done():
		p.start()
		return nil, ctx.Err()
	case b = <-line:
	}
	var a driverAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%s driver answered %q: %v", p.kind, b, err)
	}
	res := &client.RunResult{Status: a.Status, Stdout: a.Stdout, CheckpointError: a.CheckpointError}
	if len(a.FilesAhead) > 0 {
		res.Restore = &client.RestoreReport{FilesAhead: a.FilesAhead}
	}
	if a.Code != "" {
		return res, fmt.Errorf("%s client: %s: %s", p.kind, a.Code, a.Error)
	}
	return res, nil
}

// runners are the Go client, a Jupyter client (jupyter_test.go) and, where their interpreters are,
// the Python and Node drivers, each on base; CARRYOVER_CHAOS_CLIENTS narrows them.
func runners(t *testing.T, c *client.Client, base, token string) []runner {
	rs := []runner{goRunner{c}, jupyterRunner{wsBase: "ws" + strings.TrimPrefix(base, "http"), token: token}}
	argvs := map[string][]string{"python": {"/usr/bin/python3", filepath.Join("testdata", "chaos_driver.py")}}
	if node, err := exec.LookPath("node"); err == nil {
		argvs["node"] = []string{node, filepath.Join("testdata", "chaos_driver.mjs")}
	}
	for _, kind := range []string{"python", "node"} {
		argv, ok := argvs[kind]
		if !ok {
			t.Logf("no %s: its driver is left out", kind)
			continue
		}
		p := &procRunner{kind: kind, argv: append(argv, base, token)}
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.in.Close(); p.cmd.Process.Kill(); p.cmd.Wait() })
		rs = append(rs, p)
	}
	if v := os.Getenv("CARRYOVER_CHAOS_CLIENTS"); v != "" { // e.g. "jupyter,go": to study one client
		rs = slices.DeleteFunc(rs, func(r runner) bool { return !slices.Contains(strings.Split(v, ","), r.name()) })
	}
	return rs
}
