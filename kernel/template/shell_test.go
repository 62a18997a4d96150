package template

import (
	"reflect"
	"testing"

	"github.com/carryover/carryover/kernel"
)

// shellFacts is what a kernel says about its IPython shell: whether the shell was built before the
// fork (Frozen: the template froze it with the garbage collector's view of its heap, so a shell in
// the permanent generation is the template's), and what a shell must have of its own kernel.
type shellFacts struct {
	Frozen   bool              `json:"frozen"`
	Env      map[string]string `json:"env"`
	Cwd      bool              `json:"cwd"`     // _dh and starting_dir are the kernel's cwd
	Kernel   bool              `json:"kernel"`  // the shell's kernel and parent are the running kernel
	Profile  bool              `json:"profile"` // its profile and IPython dir are the kernel app's
	Home     bool              `json:"home"`
	DB       bool              `json:"db"` // %store's db is in its profile
	History  string            `json:"history"`
	Session  int               `json:"session"`
	Main     bool              `json:"main"` // sys.modules['__main__'] is the user's namespace
	Magics   bool              `json:"magics"`
	Builtins bool              `json:"builtins"`
	// the extensions loaded, whether storemagic's magics were built before the fork (in the
	// permanent generation, as Frozen), and whether %store saved a value into this kernel's profile
	Extensions  []string `json:"extensions"`
	StoreFrozen bool     `json:"store_frozen"`
	Stored      bool     `json:"stored"`
	// the app's command-line config and the config it ended with, each value's type and text (the
	// connection file's as whether it is the app's), its argv (the file's place) and extra args
	CLI    map[string]map[string][2]string `json:"cli"`
	Config map[string]map[string][2]string `json:"config"`
	Argv   []string                        `json:"argv"`
	Extra  []string                        `json:"extra"`
}

const shellFactsCode = `import gc as _g, os as _o, sys as _s, json as _j, builtins as _b
from IPython.utils.path import get_home_dir as _home
from IPython.paths import get_ipython_dir as _ipd
from ipykernel.kernelapp import IPKernelApp as _A
_app = _A.instance()
def _cfg(c):
    return {s: {k: [type(v).__name__, str(v) if k != 'connection_file' else str(v == _app.connection_file)]
                for k, v in sec.items()} for s, sec in c.items()}
_sh = get_ipython()
_k = _sh.kernel
from IPython.extensions.storemagic import StoreMagics as _SM
_sm = list({id(c): c for c in _sh.configurables if isinstance(c, _SM)}.values())  # listed twice: its own and Magics' append
_sh.user_ns['_stored_value'] = 41
_sh.run_line_magic('store', '_stored_value')
_shell = _j.dumps({'frozen': not any(o is _sh for o in _g.get_objects()),
  'env': {v: _o.environ.get(v, '') for v in ('PAGER', 'GIT_PAGER', 'CLICOLOR', 'TERM')},
  'cwd': [str(p) for p in _dh] == [_o.getcwd()] and _sh.starting_dir == _o.getcwd(),
  'kernel': _k is not None and _k.shell is _sh and _sh.parent is _k and _k.profile_dir is _sh.profile_dir,
  'profile': _sh.ipython_dir == _ipd() and _sh.profile_dir.location.startswith(_ipd()),
  'home': _sh.home_dir == _home() and _sh.logger.home_dir == _home(),
  'db': str(_sh.db.root) == _o.path.join(_sh.profile_dir.location, 'db'),
  'history': str(_sh.history_manager.hist_file), 'session': _sh.history_manager.session_number,
  'main': _s.modules['__main__'] is _sh.user_module,
  'magics': 'bash' in _sh.magics_manager.magics['cell'] and 'store' in _sh.magics_manager.magics['line'],
  'builtins': _b.get_ipython() is _sh,
  'extensions': sorted(_sh.extension_manager.loaded),
  'store_frozen': len(_sm) == 1 and not any(o is _sm[0] for o in _g.get_objects()),
  'stored': _o.path.exists(_o.path.join(_sh.profile_dir.location, 'db', 'autorestore', '_stored_value')),
  'cli': _cfg(_app.cli_config), 'config': _cfg(_app.config),
  'argv': [a if a != _app.connection_file else 'FILE' for a in _app.argv], 'extra': list(_app.extra_args)})`

// A forked kernel launched as the server launches its kernels (its history in memory) adopts the
// shell the template built, and that shell is then the kernel's own as a cold kernel's is: its
// kernel, profile, home, cwd history and the environment ZMQInteractiveShell sets; its app, which
// read that argv without traitlets' parser, has the config a cold kernel's parse gives. A kernel
// launched with another config (here without the history argument) builds its own shell.
func TestForkedKernelAdoptsTheTemplatesShell(t *testing.T) {
	t.Parallel()
	tp, spec := newProvisioner(t)
	server := *spec
	server.Argv = append(append([]string(nil), spec.Argv...), "--HistoryManager.hist_file=:memory:")
	adopted := start(t, tp, &server, nil)
	cold := startOpts(t, tp, kernel.Options{Spec: &server, Fresh: true})
	other := start(t, tp, spec, nil)
	var a, c, o shellFacts
	evalJSON(t, adopted, shellFactsCode, "_shell", &a)
	evalJSON(t, cold, shellFactsCode, "_shell", &c)
	evalJSON(t, other, shellFactsCode, "_shell", &o)
	if st := tp.Stats(); st.Forks != 2 || st.Cold != 1 {
		t.Fatalf("stats %+v, want 2 forks and 1 cold start", st)
	}
	if !a.Frozen || c.Frozen || o.Frozen {
		t.Errorf("shell built before the fork: adopted %v, cold %v, other config %v; want true, false, false", a.Frozen, c.Frozen, o.Frozen)
	}
	if !a.StoreFrozen || c.StoreFrozen || o.StoreFrozen {
		t.Errorf("storemagic loaded before the fork: adopted %v, cold %v, other config %v; want true, false, false",
			a.StoreFrozen, c.StoreFrozen, o.StoreFrozen)
	}
	cli := map[string]map[string][2]string{"IPKernelApp": {"connection_file": {"str", "True"}},
		"HistoryManager": {"hist_file": {"DeferredConfigString", ":memory:"}}}
	want := shellFacts{Env: map[string]string{"PAGER": "cat", "GIT_PAGER": "cat", "CLICOLOR": "1", "TERM": "xterm-color"},
		Cwd: true, Kernel: true, Profile: true, Home: true, DB: true, History: ":memory:", Session: 1, Main: true, Magics: true,
		Builtins: true, CLI: cli, Config: cli, Argv: []string{"-f", "FILE", "--HistoryManager.hist_file=:memory:"}, Extra: []string{},
		Extensions: []string{"IPython.extensions.storemagic"}, Stored: true}
	for name, f := range map[string]shellFacts{"adopted": a, "cold": c} {
		f.Frozen, f.StoreFrozen = false, false
		if !reflect.DeepEqual(f, want) {
			t.Errorf("%s kernel's shell %+v, want %+v", name, f, want)
		}
	}
	if o.History == ":memory:" {
		t.Errorf("the kernel launched without the history argument has its history %q", o.History)
	}
}
