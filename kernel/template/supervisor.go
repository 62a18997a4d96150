package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover/kernel"
)

// supervisor keeps one template process running for the Provisioners that fork from it: started
// again when it exits (kill -9 included), its dir, its exit watch and its memory readings.
type supervisor struct {
	cfg      Config // what the template is (python, pre-import, preload, env); its Local is unused here
	dir      string
	ownDir   bool
	watch    exitWatch
	log      *slog.Logger
	restarts atomic.Int64

	mu      sync.Mutex
	cur     *proc         // the template now (nil while none runs)
	changed chan struct{} // closed when cur changes
	closed  bool
	stop    chan struct{}
	done    chan struct{}

	memMu sync.Mutex
	mem   memReading // the template's memory, last read (TemplateStats)
}

// memReading is a template's memory at a moment: smaps_rollup walks its page tables (~10 ms), so a
// status polled often reads it at most every memEvery.
type memReading struct {
	pid           int
	at            time.Time
	rss, pss, uss int64
}

const memEvery = 5 * time.Second

// startSupervisor writes the template's files into cfg.Dir (a new temp dir when "") and starts it
// in the background.
func startSupervisor(cfg Config) (*supervisor, error) {
	s := &supervisor{cfg: cfg, dir: cfg.Dir, log: cfg.Logger.With("component", "kernel-template"),
		changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "carryover-template-")
		if err != nil {
			return nil, fmt.Errorf("kernel template: %w", err)
		}
		s.dir, s.ownDir = d, true
	}
	for name, b := range map[string][]byte{"carryover_template.py": script, "carryover_box.py": boxScript,
		"carryover_preload.py": []byte(cfg.Preload)} {
		if err := os.WriteFile(filepath.Join(s.dir, name), b, 0o600); err != nil {
			return nil, fmt.Errorf("kernel template: %w", err)
		}
	}
	// Spec files of requests a killed server left (a child that never read its own).
	old, _ := filepath.Glob(filepath.Join(s.dir, "req-*.json"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	p, err := s.startOne() // here, not in supervise: a launch right after New finds it starting
	if err == nil {
		s.cur = p
	}
	go s.supervise(p, err)
	return s, nil
}

// supervise keeps one template running: started again when it exits (kill -9 included), after a
// pause that doubles while templates keep dying young.
func (s *supervisor) supervise(p *proc, err error) {
	defer close(s.done)
	pause := time.Duration(0)
	for first := true; ; first = false {
		began := time.Now()
		if !first {
			s.restarts.Add(1)
			p, err = s.startOne()
		}
		if err == nil {
			s.setCur(p)
			select {
			case <-p.dead:
				err = p.err
			case <-s.stop:
				p.close()
				return
			}
		}
		s.setCur(nil)
		pause = nextPause(pause, time.Since(began))
		s.log.Warn("kernel template exited; starting another", "err", err, "in", pause)
		select {
		case <-s.stop:
			return
		case <-time.After(pause):
		}
	}
}

// nextPause is the wait before the next template: none after one that lived a minute, else
// doubling from 100 ms up to a minute.
func nextPause(prev, lived time.Duration) time.Duration {
	if lived > time.Minute {
		return 0
	}
	return min(max(2*prev, 100*time.Millisecond), time.Minute)
}

func (s *supervisor) setCur(p *proc) {
	s.mu.Lock()
	s.cur = p
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// startOne starts a template process (not yet warm).
func (s *supervisor) startOne() (*proc, error) {
	cfg, err := json.Marshal(map[string]any{"pre_import": s.cfg.PreImport, "server_pid": os.Getpid(),
		"preload": filepath.Join(s.dir, "carryover_preload.py")})
	if err != nil {
		return nil, err
	}
	// The last argument is room: a child writes its kernel argv over the template's (template.py's
	// _retitle), and connection file paths are long.
	argv := []string{s.cfg.Python, filepath.Join(s.dir, "carryover_template.py"), string(cfg), strings.Repeat(" ", 512)}
	env := make([]string, 0, 8)
	base := childEnv(s.cfg.importEnv()) // ipykernel reads JPY_PARENT_PID when imported: the template's is the children's
	if s.cfg.Env != nil {
		base = s.boxedEnv()
	}
	for k, v := range base {
		env = append(env, k+"="+v)
	}
	return startProc(argv, env, s.dir, filepath.Join(s.dir, "template.log"), &s.watch)
}

// boxedEnv is the environment of a template whose kernels are forked into boxes: theirs, except
// what would make it, root on the host, read or write where others can: no PYTHONPATH (box.py puts
// the boxes' entries on the kernel's sys.path after the fork), and HOME, matplotlib's and IPython's
// dirs in its own dir rather than the host's /tmp.
func (s *supervisor) boxedEnv() map[string]string {
	env := map[string]string{"JPY_PARENT_PID": "1"}
	for k, v := range s.cfg.Env {
		env[k] = v
	}
	for k, v := range s.cfg.importEnv() {
		env[k] = v
	}
	delete(env, "PYTHONPATH")
	env["HOME"] = s.dir
	env["MPLCONFIGDIR"] = filepath.Join(s.dir, "matplotlib")
	env["IPYTHONDIR"] = filepath.Join(s.dir, "ipython")
	return env
}

// ready is the warm template, waiting while one starts. An error means none is ready to fork
// (closed, or the one starting died): the launch starts its kernel cold.
func (s *supervisor) ready(ctx context.Context) (*proc, error) {
	for {
		s.mu.Lock()
		p, changed, closed := s.cur, s.changed, s.closed
		s.mu.Unlock()
		if closed {
			return nil, errors.New("kernel template: closed")
		}
		if p == nil {
			return nil, errors.New("kernel template: none running (restarting)")
		}
		select {
		case <-p.ready:
			select {
			case <-p.dead:
				return nil, fmt.Errorf("%w: %v", errDead, p.err)
			default:
				return p, nil
			}
		case <-p.dead:
			return nil, fmt.Errorf("%w before it was warm: %v (its log: %s)", errDead, p.err, filepath.Join(s.dir, "template.log"))
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pid is the warm template's process (0: none ready).
func (s *supervisor) pid() int {
	s.mu.Lock()
	p := s.cur
	s.mu.Unlock()
	if p == nil {
		return 0
	}
	select {
	case <-p.ready:
		return p.cmd.Process.Pid
	default:
		return 0
	}
}

// memory is template pid's memory, read again when the last reading is of another pid or older
// than memEvery.
func (s *supervisor) memory(pid int) (memReading, bool) {
	s.memMu.Lock()
	defer s.memMu.Unlock()
	if s.mem.pid == pid && time.Since(s.mem.at) < memEvery {
		return s.mem, true
	}
	rss, pss, uss, err := kernel.ProcMemory(pid)
	if err != nil {
		return memReading{}, false
	}
	s.mem = memReading{pid: pid, at: time.Now(), rss: rss, pss: pss, uss: uss}
	return s.mem, true
}

// close stops the template and removes its dir when it made it.
func (s *supervisor) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.watch.close()
	if s.ownDir {
		return os.RemoveAll(s.dir)
	}
	return nil
}
