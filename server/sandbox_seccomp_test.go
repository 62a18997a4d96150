package server_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// seccompProbe calls each system call the filter denies (x86-64 numbers, through libc's syscall()
// so Python's own wrappers cannot hide the errno) with arguments that would do something or fail
// otherwise without the filter, and prints {name: errno name or "ok"} as JSON.
const seccompProbe = `import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    a = [ctypes.c_char_p(x) if isinstance(x, bytes) else ctypes.c_long(x) for x in args]
    r = libc.syscall(nr, *a)
    if r < 0:
        return errno.errorcode[ctypes.get_errno()]
    if r > 2 and name.startswith(('userfaultfd', 'io_uring')):
        os.close(r)
    return 'ok'
probes = {
    'unshare(CLONE_NEWUSER)': (272, 0x10000000),
    'mount': (165, b'none', b'/tmp', b'tmpfs', 0, 0),
    'umount2': (166, b'/tmp', 0),
    'pivot_root': (155, b'.', b'.'),
    'bpf': (321, 0, 0, 0),
    'perf_event_open': (298, 0, 0, -1, -1, 0),
    'keyctl': (250, 0, -3, 0),
    'add_key': (248, b'user', b'k', b'v', 1, -3),
    'request_key': (249, b'user', b'k', 0, 0),
    'kexec_load': (246, 0, 0, 0, 0),
    'init_module': (175, 0, 0, b''),
    'finit_module': (313, -1, b'', 0),
    'delete_module': (176, b'nf_tables', 0),
    'io_uring_setup': (425, 1, 0),
    'personality(READ_IMPLIES_EXEC)': (135, 0x0400000),
    'setns': (308, -1, 0),
    'chroot': (161, b'/'),
    'uselib': (134, b'/nonexistent'),
    'userfaultfd(0)': (323, 0),
    'userfaultfd(UFFD_USER_MODE_ONLY)': (323, 1 | os.O_CLOEXEC),
    'clone3': (435, 0, 0),
}
out = {}
for name, (nr, *args) in probes.items():
    out[name] = call(nr, *args)
print(json.dumps(out))
`

// wantSeccomp is what the probe must see under the filter: EPERM for every denied call (a clean
// PermissionError, not a killed kernel), userfaultfd allowed with UFFD_USER_MODE_ONLY (the
// checkpoint engine's dirty-page tracking), and clone3 ENOSYS so glibc falls back to clone.
var wantSeccomp = func() map[string]string {
	m := map[string]string{"userfaultfd(UFFD_USER_MODE_ONLY)": "ok", "clone3": "ENOSYS"}
	for _, n := range []string{"unshare(CLONE_NEWUSER)", "mount", "umount2", "pivot_root", "bpf", "perf_event_open",
		"keyctl", "add_key", "request_key", "kexec_load", "init_module", "finit_module", "delete_module",
		"io_uring_setup", "personality(READ_IMPLIES_EXEC)", "setns", "chroot", "uselib", "userfaultfd(0)"} {
		m[n] = "EPERM"
	}
	return m
}()

// checkSeccomp compares the probe's JSON answer with wantSeccomp and returns the differences.
func checkSeccomp(t *testing.T, via, out string) []string {
	t.Helper()
	var got map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
		t.Fatalf("%s: probe output %q: %v", via, out, err)
	}
	var diff []string
	for name, want := range wantSeccomp {
		if got[name] != want {
			diff = append(diff, via+": "+name+" = "+got[name]+", want "+want)
		}
	}
	return diff
}

func TestSandboxSeccompDenies(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe uses x86-64 system call numbers")
	}
	ts := sandboxed(t)
	ts.create("sc", nil)
	must(t, 201, "put probe", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutFile(ctx, "sc", "probe.py", []byte(seccompProbe))
	})
	// In the kernel itself, in a child process of the kernel, and in an exec command.
	diff := checkSeccomp(t, "kernel", ts.stdout("sc", "exec(open('probe.py').read())"))
	diff = append(diff, checkSeccomp(t, "kernel's child", ts.stdout("sc",
		"import subprocess, sys\nprint(subprocess.run([sys.executable, 'probe.py'], capture_output=True, text=True, check=True).stdout)"))...)
	x := ts.exec("sc", client.ExecRequest{Command: "python3 probe.py"})
	if x.ExitCode != 0 {
		t.Fatalf("exec probe: %s", dump(x))
	}
	diff = append(diff, checkSeccomp(t, "exec", x.Stdout)...)
	for _, d := range diff {
		t.Error(d)
	}
	// A denied call is a Python exception, and the kernel goes on.
	r := ts.run("sc", "import os\ntry:\n    os.chroot('/')\nexcept PermissionError as e:\n    print('denied', e.errno)")
	if strings.TrimSpace(r.Stdout) != "denied 1" {
		t.Errorf("chroot from Python: %s", dump(r))
	}
	if got := ts.stdout("sc", "print(6*7)"); got != "42" {
		t.Errorf("kernel after denied calls: %q", got)
	}
	// The shell sees the same: unshare(1) cannot make a user namespace.
	x = ts.exec("sc", client.ExecRequest{Command: "unshare -U true; echo rc=$?"})
	if !strings.Contains(x.Stdout, "rc=1") || !strings.Contains(x.Stderr, "Operation not permitted") {
		t.Errorf("unshare -U in exec: %s", dump(x))
	}
}

// TestSandboxSeccompOff is the control: with sandbox.seccomp=false the same probe gets other
// answers (so TestSandboxSeccompDenies measures the filter, not the missing capabilities).
func TestSandboxSeccompOff(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe uses x86-64 system call numbers")
	}
	ts := sandboxed(t, func(c *configs.Config) { c.Sandbox.Seccomp = false })
	ts.create("nf", nil)
	must(t, 201, "put probe", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutFile(ctx, "nf", "probe.py", []byte(seccompProbe))
	})
	diff := checkSeccomp(t, "kernel's child", ts.stdout("nf",
		"import subprocess, sys\nprint(subprocess.run([sys.executable, 'probe.py'], capture_output=True, text=True, check=True).stdout)"))
	t.Logf("without the filter:\n%s", strings.Join(diff, "\n"))
	// Which calls a host refuses anyway depends on its sysctls (unprivileged user namespaces,
	// io_uring_disabled, ...); most of these must answer otherwise without the filter.
	differ := 0
	for _, name := range []string{"unshare(CLONE_NEWUSER)", "io_uring_setup", "personality(READ_IMPLIES_EXEC)", "keyctl", "clone3", "chroot"} {
		for _, d := range diff {
			if strings.HasPrefix(d, "kernel's child: "+name+" ") {
				differ++
			}
		}
	}
	if differ < 4 {
		t.Errorf("only %d of 6 probes answer otherwise without the filter: the test would not notice a missing filter", differ)
	}
}

// TestSandboxSeccompWorkloads runs what notebooks run, under the filter: the scientific stack,
// a shell pipeline, multiprocessing and threads.
func TestSandboxSeccompWorkloads(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.create("wl", nil)
	code := `import numpy as np, pandas as pd, matplotlib, subprocess, multiprocessing as mp, threading, os
from concurrent.futures import ThreadPoolExecutor
matplotlib.use('Agg')
import matplotlib.pyplot as plt
a = np.arange(1e6).reshape(1000, 1000)
print('numpy', int((a @ np.eye(1000))[999, 999]))
df = pd.DataFrame({'k': [1, 2, 1, 2], 'v': [1, 2, 3, 4]})
print('pandas', df.groupby('k').v.sum().tolist())
plt.plot([1, 2, 3]); plt.savefig('plot.png'); print('matplotlib', os.path.getsize('plot.png') > 1000)
from sklearn.linear_model import LogisticRegression
X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0, 0, 1, 1])
print('sklearn', LogisticRegression().fit(X, y).predict([[0.], [3.]]).tolist())
import torch
w = torch.ones(3, requires_grad=True); (w * torch.arange(3.)).sum().backward()
print('torch', w.grad.tolist(), torch.get_num_threads() >= 1)
print('pipeline', subprocess.run('seq 1 1000 | sort -rn | head -1', shell=True, capture_output=True, text=True).stdout.strip())
def sq(x): return x * x
with mp.get_context('fork').Pool(2) as p: print('multiprocessing', p.map(sq, range(5)))
with ThreadPoolExecutor(4) as ex: print('threads', sorted(ex.map(lambda i: threading.get_ident() and i, range(4))))
`
	r := ts.runReq("wl", client.RunRequest{Code: code, TimeoutSeconds: client.Seconds(240)})
	want := []string{"numpy 999999", "pandas [4, 6]", "matplotlib True", "sklearn [0, 1]", "torch [0.0, 1.0, 2.0] True",
		"pipeline 1000", "multiprocessing [0, 1, 4, 9, 16]", "threads [0, 1, 2, 3]"}
	if r.Status != "ok" || strings.Join(strings.Fields(r.Stdout), " ") != strings.Join(strings.Fields(strings.Join(want, "\n")), " ") {
		t.Fatalf("workloads under the filter: %s", dump(r))
	}
}

// TestSandboxDirtyPagesUnderFilter checks that the checkpoint engine's dirty-page tracking
// (userfaultfd with UFFD_USER_MODE_ONLY + PAGEMAP_SCAN) works inside the box under the filter:
// a turn that only reads a large array is checkpointed in "uffd" mode, not by re-hashing it.
func TestSandboxDirtyPagesUnderFilter(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.create("dp", nil)
	ts.run("dp", "import numpy as np\nbig = np.ones(4 << 20)")
	r := ts.run("dp", "s = float(big.sum())")
	if r.Checkpoint == nil {
		t.Fatalf("no checkpoint: %s", dump(r))
	}
	if m := r.Checkpoint.Timings; m.DirtyMode != "uffd" {
		t.Fatalf("dirty mode in the sandbox = %q (fallback %q), want uffd", m.DirtyMode, m.DirtyFallback)
	}
}
