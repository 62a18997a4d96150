package template

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/carryover/carryover/kernel"
)

// errDead is a fork asked of a template that died.
var errDead = errors.New("the kernel template exited")

// proc is one running template process and the requests in flight to it.
type proc struct {
	cmd   *exec.Cmd
	dir   string // where its request spec files are written
	stdin io.WriteCloser
	watch *exitWatch
	ready chan struct{} // closed on its {"ready"} line
	dead  chan struct{} // closed once it exited and was reaped
	err   error         // why it exited (valid after dead)

	mu       sync.Mutex
	nextID   int
	pending  map[int]*request
	children map[int]*child // forked and not yet reported reaped, by pid
}

// request is one fork in flight.
type request struct {
	spool string
	boxed bool            // a kernel inside a sandbox: not the template's child (its exit is the box's business)
	done  chan forkResult // 1 slot: read by the caller, or by whoever kills the child of a caller that gave up
}

type forkResult struct {
	c   *child
	err error
}

// message is one line the template writes (template.py says which fields each kind has).
type message struct {
	Ready  bool   `json:"ready"`
	ID     int    `json:"id"`
	PID    int    `json:"pid"`
	Error  string `json:"error"`
	Exit   int    `json:"exit"`
	Status int    `json:"status"`
}

// startProc starts a template: argv with its output (not its control lines) appended to logPath.
func startProc(argv, env []string, dir, logPath string, watch *exitWatch) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("template log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stderr = env, logf
	// Its own group (our signals do not reach it) and dead with the server, as a local kernel.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, &kernel.StartError{Argv0: argv[0], Err: err}
	}
	p := &proc{cmd: cmd, dir: dir, stdin: stdin, watch: watch, ready: make(chan struct{}), dead: make(chan struct{}),
		pending: map[int]*request{}, children: map[int]*child{}}
	go p.read(stdout)
	return p, nil
}

// read handles the template's lines until it exits, then fails what is still pending.
func (p *proc) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue // not ours (a library printing at import): its log has it
		}
		p.handle(m)
	}
	p.err = p.cmd.Wait()
	if p.err == nil {
		p.err = errDead
	}
	p.mu.Lock()
	pending := p.pending
	p.pending = map[int]*request{}
	p.mu.Unlock()
	close(p.dead)
	for _, r := range pending {
		r.done <- forkResult{err: fmt.Errorf("%w: %v", errDead, p.err)}
	}
}

// handle is one line. A child is registered (and its pidfd opened) before the next line is read,
// so its exit report, which comes later, always finds it.
func (p *proc) handle(m message) {
	switch {
	case m.Ready:
		close(p.ready)
	case m.ID > 0:
		p.mu.Lock()
		r := p.pending[m.ID]
		delete(p.pending, m.ID)
		var c *child
		if r != nil && m.PID > 0 {
			c = newChild(m.PID, r.spool, r.boxed, p)
			p.children[m.PID] = c
		}
		p.mu.Unlock()
		p.forked(r, c, m)
	case m.Exit > 0:
		p.mu.Lock()
		c := p.children[m.Exit]
		delete(p.children, m.Exit)
		p.mu.Unlock()
		if c != nil {
			c.reported(syscall.WaitStatus(m.Status))
		}
	}
}

// forked answers request r with its child c (nil when the template refused: m.Error).
func (p *proc) forked(r *request, c *child, m message) {
	if r == nil {
		return
	}
	if c == nil {
		r.done <- forkResult{err: fmt.Errorf("kernel template: %s", m.Error)}
		return
	}
	if err := p.watch.watch(c.pid, c.gone); err != nil {
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
		r.done <- forkResult{err: err}
		return
	}
	r.done <- forkResult{c: c}
}

// forkSpec is what a child needs: its kernel app's arguments, environment, cwd and log, and for a
// kernel made inside a sandbox the box to enter. It is written to a file that only the child reads
// (template.py): the template's heap, which every later child copies, never holds a kernel's env.
type forkSpec struct {
	Args []string          `json:"args"`
	Env  map[string]string `json:"env"`
	Dir  string            `json:"dir"`
	Log  string            `json:"log"`
	Box  *Box              `json:"box,omitempty"`
}

// forkLine is the request line: the id and the spec file.
type forkLine struct {
	ID     int    `json:"id"`
	Spec   string `json:"spec"`
	Boxed  bool   `json:"boxed,omitempty"`
	Holder int    `json:"holder,omitempty"` // a boxed one's holder (the kernel is its init's other child)
}

// fork asks the (ready) template for a child. A caller that gives up (ctx) leaves no child behind.
func (p *proc) fork(ctx context.Context, spec forkSpec, spool string) (*child, error) {
	r := &request{spool: spool, boxed: spec.Box != nil, done: make(chan forkResult, 1)}
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	file := filepath.Join(p.dir, fmt.Sprintf("req-%d-%d.json", p.cmd.Process.Pid, id))
	b, err := json.Marshal(spec)
	if err == nil {
		err = os.WriteFile(file, b, 0o600)
	}
	var line []byte
	if err == nil {
		fl := forkLine{ID: id, Spec: file}
		if spec.Box != nil {
			fl.Boxed, fl.Holder = true, spec.Box.Holder
		}
		line, err = json.Marshal(fl)
	}
	if err == nil {
		p.pending[id] = r
		_, err = p.stdin.Write(append(line, '\n')) // under p.mu: one line at a time
	}
	if err != nil {
		delete(p.pending, id)
		p.mu.Unlock()
		_ = os.Remove(file)
		return nil, fmt.Errorf("kernel template: %w", err)
	}
	p.mu.Unlock()
	select {
	case res := <-r.done:
		if res.err != nil || r.boxed { // read by now, or never to be
			_ = os.Remove(file)
		}
		return res.c, res.err
	case <-ctx.Done():
		go func() { // the answer may be on its way: kill what it brings
			res := <-r.done
			if res.c != nil {
				res.c.Kill()
			}
			if res.err != nil || r.boxed {
				_ = os.Remove(file)
			}
		}()
		return nil, ctx.Err()
	}
}

// close ends the template (its children stay: they are the server's kernels).
func (p *proc) close() {
	_ = p.stdin.Close()
	select {
	case <-p.dead:
	case <-timeAfter(closeGrace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.dead
	}
}
