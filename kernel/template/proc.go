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
	enter bool            // a box entered ahead (proc.enter): answered with its first child, no kernel
	done  chan forkResult // 1 slot: read by the caller, or by whoever kills the child of a caller that gave up
}

type forkResult struct {
	c       *child
	entered int // an enter request's first child
	err     error
}

// errUnused is a fork into an entered box refused before any kernel was asked of it (template.py's
// "unused"): the box may be forked into the usual way.
var errUnused = errors.New("no kernel was asked of the entered box")

// message is one line the template writes (template.py says which fields each kind has).
type message struct {
	Ready   bool   `json:"ready"`
	ID      int    `json:"id"`
	PID     int    `json:"pid"`
	Entered int    `json:"entered"`
	Unused  bool   `json:"unused"` // an entered box's fork refused before any kernel was asked of it
	Error   string `json:"error"`
	Exit    int    `json:"exit"`
	Status  int    `json:"status"`
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
		if r != nil && r.enter {
			r.done <- forkResult{entered: m.Entered, err: refused(m.Entered > 0, m.Error)}
			return
		}
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

// refused is the template's refusal (msg) of a request, nil when ok.
func refused(ok bool, msg string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("kernel template: %s", msg)
}

// forked answers request r with its child c (nil when the template refused: m.Error).
func (p *proc) forked(r *request, c *child, m message) {
	if r == nil {
		return
	}
	if c == nil {
		err := fmt.Errorf("kernel template: %s", m.Error)
		if m.Unused {
			err = fmt.Errorf("%w: %w", errUnused, err)
		}
		r.done <- forkResult{err: err}
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
	// OOMScoreAdj is the kernel's oom_score_adj, set by the child while it is one thread (template.py's
	// _raise_oom_score): the launch's kernel.RaiseOOMScore then finds it set and writes nothing.
	OOMScoreAdj int `json:"oom_score_adj,omitempty"`
}

// forkLine is the request line: the id and the spec file.
type forkLine struct {
	ID      int    `json:"id"`
	Spec    string `json:"spec,omitempty"`
	Boxed   bool   `json:"boxed,omitempty"`
	Holder  int    `json:"holder,omitempty"`  // a boxed one's holder (the kernel is its init's other child)
	Enter   bool   `json:"enter,omitempty"`   // enter the box ahead (proc.enter): no kernel yet
	Entered int    `json:"entered,omitempty"` // the enter request whose box the kernel is made in
	Box     *Box   `json:"box,omitempty"`     // an enter request's box (no kernel's env: in the line)
}

// fork asks the (ready) template for a child. A caller that gives up (ctx) leaves no child behind.
func (p *proc) fork(ctx context.Context, spec forkSpec, spool string) (*child, error) {
	return p.forkIn(ctx, spec, spool, 0)
}

// forkIn is fork, of a boxed kernel in the box that the enter request entered named (0: none).
func (p *proc) forkIn(ctx context.Context, spec forkSpec, spool string, entered int) (*child, error) {
	r := &request{spool: spool, boxed: spec.Box != nil, done: make(chan forkResult, 1)}
	fl := forkLine{Entered: entered}
	if spec.Box != nil {
		fl.Boxed, fl.Holder = true, spec.Box.Holder
	}
	res, err := p.ask(ctx, r, &spec, &fl)
	return res.c, err
}

// enter has the template enter box ahead (template.py's enter request) and answers the request's id,
// which a later forkIn names, and the first child's pid.
func (p *proc) enter(ctx context.Context, box Box) (id, pid int, err error) {
	r := &request{enter: true, done: make(chan forkResult, 1)}
	fl := forkLine{Enter: true, Holder: box.Holder, Box: &box}
	res, err := p.ask(ctx, r, nil, &fl)
	if err != nil {
		return 0, 0, err
	}
	return fl.ID, res.entered, nil
}

// ask sends request r (spec, if any, in a file only the child reads; the line fl, given its id here)
// and waits for its answer. A caller that gives up (ctx) leaves no child behind.
func (p *proc) ask(ctx context.Context, r *request, spec *forkSpec, fl *forkLine) (forkResult, error) {
	p.mu.Lock()
	p.nextID++
	fl.ID = p.nextID
	var err error
	if spec != nil {
		fl.Spec = filepath.Join(p.dir, fmt.Sprintf("req-%d-%d.json", p.cmd.Process.Pid, fl.ID))
		var b []byte
		if b, err = json.Marshal(spec); err == nil {
			err = os.WriteFile(fl.Spec, b, 0o600)
		}
	}
	var line []byte
	if err == nil {
		line, err = json.Marshal(fl)
	}
	if err == nil {
		p.pending[fl.ID] = r
		_, err = p.stdin.Write(append(line, '\n')) // under p.mu: one line at a time
	}
	if err != nil {
		delete(p.pending, fl.ID)
		p.mu.Unlock()
		removeSpec(fl.Spec)
		return forkResult{}, fmt.Errorf("kernel template: %w", err)
	}
	p.mu.Unlock()
	// A boxed kernel's spec was read before the answer (by a child the box may have killed since):
	// removed here as well.
	removable := func(res forkResult) bool { return res.err != nil || r.boxed }
	select {
	case res := <-r.done:
		if removable(res) { // read by now, or never to be
			removeSpec(fl.Spec)
		}
		return res, res.err
	case <-ctx.Done():
		go func() { // the answer may be on its way: kill what it brings
			res := <-r.done
			if res.c != nil {
				res.c.Kill()
			}
			if removable(res) {
				removeSpec(fl.Spec)
			}
		}()
		return forkResult{}, ctx.Err()
	}
}

// removeSpec removes a request's spec file ("": none).
func removeSpec(file string) {
	if file != "" {
		_ = os.Remove(file)
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
