package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ConnectionInfo is the content of a Jupyter connection file.
type ConnectionInfo struct {
	Transport       string `json:"transport"` // "tcp" or "ipc"
	IP              string `json:"ip"`        // 127.0.0.1, or for ipc the socket path prefix
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

// maxSocketPath is the limit of sun_path (108 bytes including the NUL) on Linux.
const maxSocketPath = 107

// ipcPrefix is the socket path prefix inside the per-kernel dir: sockets are <dir>/k-1 ... <dir>/k-5.
const ipcPrefix = "k"

// newConnectionInfo makes a fresh connection for one kernel process: a new random key (32 bytes, hex,
// used as the HMAC-SHA256 key as jupyter_client does with its key string) and new endpoints. For tcp
// it picks free ports on 127.0.0.1 (the usual bind-to-0-then-close race is accepted, like
// jupyter_client); for ipc it uses short fixed names under dir and removes stale socket files.
func newConnectionInfo(transport, dir, kernelName string) (ConnectionInfo, error) {
	ci := ConnectionInfo{
		Transport:       transport,
		Key:             randomHex(32),
		SignatureScheme: "hmac-sha256",
		KernelName:      kernelName,
	}
	switch transport {
	case "tcp":
		ci.IP = "127.0.0.1"
		ports, err := pickPorts(5)
		if err != nil {
			return ci, err
		}
		ci.ShellPort, ci.IOPubPort, ci.StdinPort, ci.ControlPort, ci.HBPort = ports[0], ports[1], ports[2], ports[3], ports[4]
	case "ipc":
		ci.IP = filepath.Join(dir, ipcPrefix)
		ci.ShellPort, ci.IOPubPort, ci.StdinPort, ci.ControlPort, ci.HBPort = 1, 2, 3, 4, 5
		for _, p := range ci.ports() {
			path := ci.IP + "-" + strconv.Itoa(p)
			if len(path) > maxSocketPath {
				return ci, fmt.Errorf("ipc socket path %q is %d bytes, the limit is %d: use a shorter runtime dir", path, len(path), maxSocketPath)
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return ci, fmt.Errorf("remove stale socket: %w", err)
			}
		}
	default:
		return ci, fmt.Errorf("unknown transport %q (want ipc or tcp)", transport)
	}
	return ci, nil
}

func (ci ConnectionInfo) ports() []int {
	return []int{ci.ShellPort, ci.IOPubPort, ci.StdinPort, ci.ControlPort, ci.HBPort}
}

// endpoint returns the zmq endpoint of one of the ports.
func (ci ConnectionInfo) endpoint(port int) string {
	if ci.Transport == "ipc" {
		return "ipc://" + ci.IP + "-" + strconv.Itoa(port)
	}
	return "tcp://" + net.JoinHostPort(ci.IP, strconv.Itoa(port))
}

// removeSockets deletes the ipc socket files (the kernel does not remove them: it does not own the
// connection file we wrote).
func (ci ConnectionInfo) removeSockets() {
	if ci.Transport != "ipc" {
		return
	}
	for _, p := range ci.ports() {
		_ = os.Remove(ci.IP + "-" + strconv.Itoa(p))
	}
}

// write stores the connection file with mode 0600: it holds the signing key. The old file (a
// restart writes it again) is removed and the new one created exclusively without following
// symlinks: a sandboxed kernel can write its runtime dir, and must not be able to plant a link
// that makes the server overwrite a host file with the key.
func (ci ConnectionInfo) write(path string) error {
	b, err := json.MarshalIndent(ci, "", "  ")
	if err != nil {
		return fmt.Errorf("connection file: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("connection file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("connection file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("connection file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("connection file: %w", err)
	}
	return nil
}

// freePorts asks the OS for n distinct free tcp ports on 127.0.0.1, holding all listeners open until
// every port is chosen so that the same port is not returned twice. Between our choice and the
// kernel's bind the port is free again, and another kernel started meanwhile could be handed it
// (seen with a dozen kernels starting at once on a loaded machine): ports handed out in the last
// minute are skipped, so at least this process never gives one port to two kernels.
// pickPorts is freePorts; a test replaces it to hand a kernel a port someone else holds.
var pickPorts = freePorts

func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("find a free port: every port offered was handed out recently")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		if p := l.Addr().(*net.TCPAddr).Port; recentPorts.take(p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// recentPorts remembers the ports freePorts handed out, for a minute.
var recentPorts = &portMemo{given: map[int]time.Time{}}

type portMemo struct {
	mu    sync.Mutex
	given map[int]time.Time
}

// take records p as handed out now; false if it was handed out within the last minute.
func (m *portMemo) take(p int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for q, t := range m.given {
		if now.Sub(t) > time.Minute {
			delete(m.given, q)
		}
	}
	if _, ok := m.given[p]; ok {
		return false
	}
	m.given[p] = now
	return true
}

// defaultRuntimeBase is os.TempDir()/carryover-<uid>: short (socket paths), per user, and private.
func defaultRuntimeBase() string {
	return filepath.Join(os.TempDir(), "carryover-"+strconv.Itoa(os.Getuid()))
}

// makeRuntimeDir creates a private per-kernel dir under base. base is created 0700 when missing; an
// existing base must be a directory owned by us (a shared /tmp invites symlink games).
func makeRuntimeDir(base string) (string, error) {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("runtime dir: %w", err)
	}
	fi, err := os.Stat(base)
	if err != nil {
		return "", fmt.Errorf("runtime dir: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("runtime dir %s: not a directory", base)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("runtime dir %s: owned by uid %d, not us", base, st.Uid)
	}
	sweepOnce(base)
	dir, err := os.MkdirTemp(base, "k") // 0700, race-free, short: k<up to 10 digits>
	if err != nil {
		return "", fmt.Errorf("runtime dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(selfOwner()), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("runtime dir: %w", err)
	}
	return dir, nil
}

// ownerFile records which server process owns a runtime dir: "<pid> <start time in ticks>", so that
// a pid reused by another process is not mistaken for the owner.
const ownerFile = "owner"

func selfOwner() string {
	pid := os.Getpid()
	return strconv.Itoa(pid) + " " + strconv.FormatInt(procStartTime(pid), 10) + "\n"
}

// procStartTime is field 22 of /proc/<pid>/stat (0 when the process does not exist).
func procStartTime(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseInt(string(f[19]), 10, 64)
	return v
}

var (
	sweptMu sync.Mutex
	swept   = map[string]bool{}
)

// sweepOnce removes, once per process and base dir, the runtime dirs left by server processes that
// died without shutting their kernels down (ipykernel's parent poller stops such kernels, but their
// dirs stay). Dirs without an owner file (being created right now, or not ours) are left alone.
func sweepOnce(base string) {
	sweptMu.Lock()
	defer sweptMu.Unlock()
	if swept[base] {
		return
	}
	swept[base] = true
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "k") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		var pid int
		var start int64
		if _, err := fmt.Sscan(string(b), &pid, &start); err != nil || pid <= 0 {
			continue
		}
		if procStartTime(pid) == start {
			continue // the owner is alive
		}
		_ = os.RemoveAll(dir)
	}
}
