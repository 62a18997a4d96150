package template

import (
	"reflect"
	"testing"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// indexCode has a kernel index its modules' objects as the snapshot agent does before a session's
// first turn (its preimport op, its first snapshot), and says how much private memory that took.
const indexCode = `import json as _j, sys as _s
def _uss():
    with open('/proc/self/smaps_rollup') as f:
        return sum(int(l.split()[1]) for l in f if l.startswith('Private_'))
_m = _s.modules['carryover_agent']
_had = len(_m.owners._index)
_b = _uss()
_m.owners.index()
_index = _j.dumps({'had': _had, 'grew_kib': _uss() - _b, 'stdout': _m.owners.owner_of(_s.stdout)})`

// TestPreloadWarmIsTheChildrensToo: the agent's index of the modules' objects is made once, in the
// template (the preload's carryover_warm), so a forked kernel starts with it and its own index
// costs it nothing. Made in each kernel instead (the control: the same preload without the hook),
// reading every module attribute bumps each object's reference count and back, which copies every
// page holding one: megabytes of the template's memory made private in every kernel.
func TestPreloadWarmIsTheChildrensToo(t *testing.T) {
	t.Parallel()
	warm, spec := newPreloaded(t, persistence.AgentPreload(), "numpy")
	cold, _ := newPreloaded(t, persistence.AgentPreload()+"del carryover_warm\n", "numpy")
	got, control := indexed(t, start(t, warm, spec, nil)), indexed(t, start(t, cold, spec, nil))
	if got.Had < 1000 || got.GrewKiB > 1024 {
		t.Errorf("forked from a warmed template: the kernel had %d objects indexed (want the template's, >= 1,000) "+
			"and its index took %d KiB of private memory (want <= 1 MiB)", got.Had, got.GrewKiB)
	}
	if control.Had != 0 || control.GrewKiB < 4*got.GrewKiB+2048 {
		t.Errorf("control (no warm hook): had %d indexed (want 0), its index took %d KiB (want well over the "+
			"warmed kernel's %d KiB: else this test measures nothing)", control.Had, control.GrewKiB, got.GrewKiB)
	}
	// What the kernel's start rebinds after the fork (sys.stdout is its stream) is indexed as the
	// child has it: the child indexes again the modules whose dicts changed since the template's.
	for _, f := range []indexFacts{got, control} {
		if len(f.Stdout) != 2 || f.Stdout[0] != "sys" || f.Stdout[1] != "stdout" {
			t.Errorf("the kernel's sys.stdout is indexed as %v, want sys.stdout", f.Stdout)
		}
	}
	t.Logf("index in the child: %d KiB warmed, %d KiB without the hook", got.GrewKiB, control.GrewKiB)
}

type indexFacts struct {
	Had     int      `json:"had"`
	GrewKiB int      `json:"grew_kib"`
	Stdout  []string `json:"stdout"` // the module attribute sys.stdout is found as
}

// indexed runs indexCode in k.
func indexed(t *testing.T, k *kernel.Kernel) indexFacts {
	t.Helper()
	var f indexFacts
	evalJSON(t, k, indexCode, "_index", &f)
	return f
}

// pagesCode says over how many 4 KiB pages the keys of a kernel's sys.modules lie (CPython's id is
// the object's address), and checks the keys still find their modules.
const pagesCode = `import json as _j, sys as _s
_pages = _j.dumps({'modules': len(_s.modules), 'pages': len({id(k) >> 12 for k in _s.modules}),
    'found': _s.modules['json'] is _j and all(type(k) is str for k in _s.modules)})`

// TestModuleNamesShareAFewPages: the template gives sys.modules keys copied one after the other
// (_compact_module_names), so a forked kernel's start, which writes every key's reference count
// (IPython's set(sys.modules)), copies a few of the template's pages, not one page per two modules
// (~900 pages for ~1,500 modules with the names where each import had left them: 4 ms of a start).
func TestModuleNamesShareAFewPages(t *testing.T) {
	t.Parallel()
	tp, spec := newPreloaded(t, persistence.AgentPreload(), "numpy")
	var got struct {
		Modules int  `json:"modules"`
		Pages   int  `json:"pages"`
		Found   bool `json:"found"`
	}
	evalJSON(t, start(t, tp, spec, nil), pagesCode, "_pages", &got)
	if got.Modules < 500 || !got.Found || got.Pages*4 > got.Modules {
		t.Errorf("a forked kernel's %d module names lie on %d pages (want at most one page per 4 names), "+
			"its keys find their modules: %v", got.Modules, got.Pages, got.Found)
	}
	t.Logf("%d module names on %d pages", got.Modules, got.Pages)
}

// quickCode says whether the kernel's stdout and stderr have the agent's quick flush (replies.py)
// and whether the agent is installed.
const quickCode = `import json as _j, sys as _s
_quick = _j.dumps([getattr(f.flush, '_carryover', False) for f in (_s.stdout, _s.stderr)] + ['__carryover__' in globals()])`

// TestForkedKernelsFlushQuicklyFromTheirStart: the preload's carryover_child_io runs in a forked
// kernel once its output streams exist, so its start's flushes (IPython's init_code, ipykernel's)
// do not wait on the IOPub thread with nothing to send, before the agent is installed. The control
// (the same preload without the hook) keeps ipykernel's flush until an install.
func TestForkedKernelsFlushQuicklyFromTheirStart(t *testing.T) {
	t.Parallel()
	hooked, spec := newPreloaded(t, persistence.AgentPreload())
	bare, _ := newPreloaded(t, persistence.AgentPreload()+"del carryover_child_io\n")
	var got, control []bool
	evalJSON(t, start(t, hooked, spec, nil), quickCode, "_quick", &got)
	evalJSON(t, start(t, bare, spec, nil), quickCode, "_quick", &control)
	if !reflect.DeepEqual(got, []bool{true, true, false}) || !reflect.DeepEqual(control, []bool{false, false, false}) {
		t.Errorf("stdout and stderr quick, agent installed: %v forked with the hook, %v without; want [true true false], [false false false]",
			got, control)
	}
}
