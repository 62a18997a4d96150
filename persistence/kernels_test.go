package persistence_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/kernel/template"
	"github.com/carryover/carryover/persistence"
)

// The package's kernels are forked from warm templates (kernel/template), as the server's are by
// default (pool.templates): a fresh `python3 -m ipykernel_launcher` costs ~0.6-1 s of CPU before its
// first cell, and these tests start ~45. The templates pre-import nothing (a restore must still
// import the user's libraries itself, which is what these tests check) and import with the tests'
// MPLBACKEND, so every kernel of startKernel is forkable; one that still starts cold is logged, and
// the run fails when most did (mustBeForked, closeTemplates).
// CARRYOVER_TEST_COLD_KERNELS=1 starts every kernel from scratch, as before.
const coldKernelsEnv = "CARRYOVER_TEST_COLD_KERNELS"

// kernelEnv is the env of the tests' kernels (and of their templates at import).
var kernelEnv = map[string]string{"MPLBACKEND": "Agg"}

// templates are two fork servers: a test's kernels take turns between them, so a kernel restoring
// what the one before it saved has another hash seed (PYTHONHASHSEED is fixed per interpreter and
// shared by one template's children), as a cold kernel would.
var templates struct {
	once  sync.Once
	tps   [2]*template.Provisioner
	err   error
	count sync.Map // test name -> *atomic.Int64: kernels the test started
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := closeTemplates(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// kernelProvisioner is the provisioner of t's next kernel (nil: a cold one, the local provisioner).
func kernelProvisioner(t *testing.T, python string) kernel.Provisioner {
	t.Helper()
	if os.Getenv(coldKernelsEnv) == "1" {
		return nil
	}
	templates.once.Do(func() { templates.err = startTemplates(python) })
	if templates.err != nil {
		t.Fatalf("kernel template: %v", templates.err)
	}
	n, _ := templates.count.LoadOrStore(t.Name(), new(atomic.Int64))
	return templates.tps[(n.(*atomic.Int64).Add(1)-1)%2]
}

// startTemplates starts both templates and waits until they are warm: a launch waits only 15 s for
// a template still warming before it starts cold, which make test's load (~20 on 2 cores) can exceed.
func startTemplates(python string) error {
	for i := range templates.tps {
		tp, err := template.New(template.Config{Python: python, ImportEnv: kernelEnv, Preload: persistence.AgentPreload()})
		if err != nil {
			return err
		}
		templates.tps[i] = tp
	}
	deadline := time.Now().Add(150 * time.Second) // startKernel's own bound
	for _, tp := range templates.tps {
		for tp.Stats().PID == 0 {
			if time.Now().After(deadline) {
				return errors.New("not warm after 150 s (its log is template.log in its dir)")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// mustBeForked logs when t's kernel k was started cold although a template was asked for (a cold
// kernel is this process's child, a forked one the template's): a template restarting under load
// can make one launch fall back cold, which changes no result; closeTemplates fails the run when
// most did, which is a configuration that does not fork.
func mustBeForked(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	if kernelParent(t, k) == os.Getpid() {
		t.Logf("kernel %d started cold, not forked from a template (see its log; %s=1 starts all cold)", k.PID(), coldKernelsEnv)
	}
}

// kernelParent is k's parent process (-1: unknown): this process for a kernel started cold, the
// template for a forked one.
func kernelParent(t *testing.T, k *kernel.Kernel) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", k.PID()))
	if err != nil {
		t.Fatalf("kernel's stat: %v", err)
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	fields := append(strings.Fields(rest), "", "")
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}
	return ppid
}

// closeTemplates stops the templates, and fails the run when more kernels started cold than were
// forked: the templates are not doing what these tests are set up for.
func closeTemplates() error {
	var cold, forks int64
	for _, tp := range templates.tps {
		if tp == nil {
			continue
		}
		st := tp.Stats()
		cold, forks = cold+st.Cold, forks+st.Forks
		_ = tp.Close()
	}
	if cold > 0 {
		fmt.Fprintf(os.Stderr, "kernel templates: %d kernels forked, %d started cold\n", forks, cold)
	}
	if cold > forks {
		return fmt.Errorf("%d kernels started cold, %d forked from a template: the templates do not fork", cold, forks)
	}
	return nil
}
