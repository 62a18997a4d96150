// Package pgtest runs a real PostgreSQL (Debian's postgresql package) for tests: a throw-away cluster
// made by initdb in a temporary directory, served by the postgres binary on a loopback port with
// fsync off (a test database needs no durability across power loss, and fsync dominates its cost
// here). One server is shared by every test of a package run (Shared + Main); each test takes a fresh
// database of its own (NewDB), so tests stay independent without paying a server start each.
//
// PostgreSQL refuses to run as root, and CI runs as root: the server then runs as the unprivileged
// user nobody, with its directory handed to that user.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/freeport"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Server is one running PostgreSQL cluster.
type Server struct {
	Dir  string // the cluster's data directory
	Port int
	Log  string // the server's log file

	bin  string
	cred *syscall.Credential // nil when not root
	cmd  *exec.Cmd
	done chan struct{} // closed when the postgres process exited
}

// BinDir finds the newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/N/bin).
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("pgtest: no PostgreSQL under /usr/lib/postgresql (make deps installs Debian's postgresql)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Init creates a new cluster in a new directory under parent ("" = the system temp dir) without
// starting it.
func Init(parent string) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(parent, "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: filepath.Join(root, "data"), Log: filepath.Join(root, "postgres.log"), bin: bin}
	if os.Geteuid() == 0 {
		s.cred = &syscall.Credential{Uid: 65534, Gid: 65534} // nobody
		if err := os.Chown(root, 65534, 65534); err != nil {
			return nil, err
		}
	}
	out, err := s.command("initdb", "-D", s.Dir, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--no-instructions", "--no-sync").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	return s, nil
}

// command prepares one of PostgreSQL's programs, run as the cluster's user.
func (s *Server) command(prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, prog), args...)
	cmd.Env = []string{"LC_ALL=C.UTF-8", "PATH=/usr/bin:/bin", "HOME=" + filepath.Dir(s.Dir)}
	cmd.Dir = filepath.Dir(s.Dir)
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// Start starts the postgres process on a free loopback port (the same port as before on a restart)
// with the extra settings given as "name=value", and waits until it accepts connections.
func (s *Server) Start(settings ...string) error {
	if s.Port == 0 {
		port, err := freeport.Port()
		if err != nil {
			return err
		}
		s.Port = port
	}
	args := []string{"-D", s.Dir, "-p", strconv.Itoa(s.Port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB"}
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	cmd := s.command("postgres", args...)
	logf, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true // a ^C to the test does not reach it before Stop does
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.done) }()
	return s.waitReady(30 * time.Second)
}

// PID is the postmaster's process id, its backends being its children (the bench reads their CPU
// time); 0 before Start.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// waitReady polls until the server answers a query, or the process died, or d passed.
func (s *Server) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		db, err := sql.Open("pgx", s.DSN("postgres"))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = db.PingContext(ctx)
			cancel()
			db.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(s.Log)
			return fmt.Errorf("pgtest: postgres exited: %s", tail(log))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready after %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DSN is the connection string of database db.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

var dbSeq atomic.Int64

// NewDB creates a fresh, empty database and returns its DSN.
func (s *Server) NewDB() (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	db, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return s.DSN(name), nil
}

// Stop shuts the server down (fast shutdown: open sessions are ended) and waits for it.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
	return nil
}

// Kill ends the server with SIGKILL, as a crash would (it recovers from its WAL when started again).
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Remove stops the server and deletes its directory.
func (s *Server) Remove() error {
	s.Stop()
	return os.RemoveAll(filepath.Dir(s.Dir))
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns the package run's server, starting it on first use. Main removes it at the end.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedOnce.Do(func() {
		shared, sharedErr = Init("")
		if sharedErr == nil {
			sharedErr = shared.Start()
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// NewDB returns the DSN of a fresh database on the shared server.
func NewDB(t testing.TB) string {
	t.Helper()
	dsn, err := Shared(t).NewDB()
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// Main runs a package's tests (call it from TestMain) and then removes the shared server.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Remove()
	}
	return code
}

// Replica makes a streaming replica of s (pg_basebackup -R: it follows s from the moment it
// starts) in a new directory and starts it on a port of its own.
func (s *Server) Replica() (*Server, error) {
	root, err := os.MkdirTemp("", "pgtest-replica-")
	if err != nil {
		return nil, err
	}
	r := &Server{Dir: filepath.Join(root, "data"), Log: filepath.Join(root, "postgres.log"), bin: s.bin, cred: s.cred}
	if r.cred != nil {
		if err := os.Chown(root, int(r.cred.Uid), int(r.cred.Gid)); err != nil {
			return nil, err
		}
	}
	out, err := r.command("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres",
		"-D", r.Dir, "-R", "-X", "stream", "--no-sync", "--checkpoint=fast").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pgtest: pg_basebackup: %v: %s", err, out)
	}
	if err := r.Start(); err != nil {
		return nil, err
	}
	return r, nil
}
