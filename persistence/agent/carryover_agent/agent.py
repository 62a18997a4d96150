"""The agent object bound as ``__carryover__``: the op dispatcher of the spool protocol, the cells
of the turns since the last snapshot, and the state it keeps between them. The ops themselves live
in snapshot.py and restore.py."""

import gc
import importlib
import json
import os
import time

from . import history, kernelops, libstate, owners, quiet, replies, widgetstate
from .classes import _sentinels
from .common import _IPY_NAMES, _IPY_RE, _NO_ALIAS, JSONText, _xxh3, dill, zstandard
from .dirty import _Tracker
from .groups import _State
from . import lazy
from . import shared
from .restore import op_restore
from .snapshot import op_snapshot


class Agent:
    def __init__(self, shell, spool_dir):
        self.shell = shell
        self.ns = shell.user_ns
        self.spool = spool_dir
        self.spool_host = spool_dir
        self.cells = []
        self._parsed = {}  # raw cell -> IPython's transform of it as the shell ran it (analysis.analyze)
        self.state = _State()
        self.pending = None  # (token, state, cells, what history.record answered)
        self._defnames = {}
        self._sentinels = _sentinels()
        self._recheck_pos = 0
        self._result = None
        self._shared = _NO_ALIAS
        self._env0 = dict(os.environ)
        self._env_last = None  # (os.environ's bytes mapping, the diff it gave): snapshot._env_diff
        self._ipy_seen = set()  # names found to be IPython's own (_user_names)
        self._warned = {}
        self._tracker = _Tracker()
        self.setups = 0
        self._state_cache = {}  # state group name -> (value, its _Pickled, compared key): snapshot._pickle_state
        self._fingerprints = {}  # skipped name -> its fingerprint (fingerprint.py), for replay
        self._sliced = {}  # name -> sliced._Cache of a large container saved in slices
        self._unsliced = {}  # name -> container found unsliceable (pickled whole while bound)
        self._turn = history.TurnClock()  # the running turn's start, generator states, success
        history.reset(self)  # self.history: the turns so far, for replay
        self._own = quiet.Baseline()  # the kernel's own threads and tasks (quiet.py)

    # --- wiring ------------------------------------------------------------------------------------
    def pre_run_cell(self, info):
        setup = _setup_of(self.shell)
        if setup is not None:
            _apply_setup(setup)
            self.setups += 1  # how many cells brought the session's set-up (tests, diagnostics)
        raw = getattr(info, "raw_cell", None)
        if raw:
            self._turn.begin(getattr(self.shell, "execution_count", None), getattr(info, "store_history", True))
            self.cells.append(raw)

    def post_run_cell(self, result):
        self._turn.end(result)
        info = getattr(result, "info", None)
        raw = getattr(info, "raw_cell", None)
        if raw and getattr(info, "store_history", False):
            # IPython stored the cell's transform in its history as it ran it: the snapshot's
            # analysis reads it there instead of transforming the cell again (the transform
            # tokenizes the whole cell).
            hm = getattr(self.shell, "history_manager", None)
            try:
                if hm.input_hist_raw[-1] == raw.rstrip("\n"):
                    self._parsed[raw] = hm.input_hist_parsed[-1]
            except (AttributeError, IndexError, TypeError):
                pass

    def call(self, op, args="{}"):
        """Runs op with JSON args; the JSON answer is fetched with take() (see module doc)."""
        a = json.loads(args) if isinstance(args, str) else (args or {})
        # The cyclic GC would run over the whole heap again and again while pickling builds millions of
        # objects (memo copies, unpickled containers): 5x slower on a dict of 1M dicts.
        enabled = gc.isenabled()
        gc.disable()
        try:
            out = getattr(self, "op_" + op)(a)
        finally:
            if enabled:
                gc.enable()
        self._result = JSONText(json.dumps(out, separators=(",", ":")))
        return None

    def take(self):
        r, self._result = self._result, None
        return r if r is not None else JSONText("null")

    def op_batch(self, a):
        """Runs the ops of a["calls"] ([[op, args], ...]) in order and answers their answers: what a
        fresh kernel is asked right after the install (ping, the output guard) rides on the install's
        request instead of costing one round trip each. An op that raises ends the batch (raised)."""
        return [getattr(self, "op_" + op)(args or {}) for op, args in a.get("calls") or []]

    def op_ping(self, a):
        return {"ok": True, "pid": os.getpid(), "spool": self.spool, "spool_host": self.spool_host, "xxhash": _xxh3 is not None, "zstd": zstandard is not None,
                "dill": dill is not None}

    def op_preimport(self, a):
        """Imports modules into sys.modules only, not the namespace, so a pooled kernel has them
        loaded when a session claims it: a wake then costs the data, not the imports. Modules that
        are not installed, or fail to import, are listed in "missing". It runs before any session has
        the kernel (the pool's warm-up), so it imports in the foreground: matplotlib picks its backend
        on the main thread, as it would in a cell."""
        mods = [m for m in a.get("modules") or () if isinstance(m, str) and m]
        t0 = time.perf_counter()
        loaded, missing = [], []
        for m in mods:
            try:
                importlib.import_module(m)
                loaded.append(m)
            except Exception:
                missing.append(m)
        owners.index()  # their objects, indexed before a session's first turn needs them
        self._own.take()  # what the imports started is the kernel's too: no session code ran yet
        return {"ok": True, "modules": loaded, "missing": missing, "ms": round((time.perf_counter() - t0) * 1e3, 1)}

    def op_snapshot(self, a):
        return op_snapshot(self, a)

    def op_restore(self, a):
        return op_restore(self, a)

    def op_lazy_map(self, a):
        return lazy.op_lazy_map(self, a)

    def op_shared_map(self, a):
        return shared.op_shared_map(self, a)

    # The session service's ops (kernelops.py): set-up, env, output guard, variable inspector.
    def op_setup(self, a):
        return kernelops.op_setup(self, a)

    def op_env(self, a):
        return kernelops.op_env(self, a)

    def op_output_guard(self, a):
        return kernelops.op_output_guard(self, a)

    def op_variables(self, a):
        return kernelops.op_variables(self, a)

    def op_rows(self, a):
        return kernelops.op_rows(self, a)

    def op_widgets(self, a):
        return widgetstate.op_widgets(self, a)

    def op_forget(self, a):
        self.state = _State()
        self.pending = None
        self._sliced, self._unsliced = {}, {}
        self._state_cache = {}
        return {"ok": True}

    # --- namespace ---------------------------------------------------------------------------------
    def _keep(self, name, value):
        """Whether name is the user's: not IPython's own (_ipython_name), not hidden by it."""
        if _ipython_name(name):
            return False
        hidden = self.shell.user_ns_hidden
        return not (name in hidden and hidden[name] is value)

    def _user_names(self):
        """The names to save (_keep's rule, inlined: this runs at every snapshot over a namespace that
        IPython grows by _iN and _N every turn, thousands of names in a long session). Whether a name
        is IPython's depends on the name alone, so each is judged once (_ipy_seen): a snapshot then
        costs a set lookup per name, not a regex (after 1,000 turns 0.14 ms, not 1.1 ms)."""
        ns, hidden, ipy = self.ns, self.shell.user_ns_hidden, self._ipy_seen
        for k in ns.keys() - ipy:
            if _ipython_name(k):
                ipy.add(k)
        if len(ipy) > 2 * len(ns) + 1024:  # IPython's output cache was flushed: forget the names gone
            ipy.intersection_update(ns.keys())
        return {k: v for k, v in ns.items() if k not in ipy and not (k in hidden and hidden[k] is v)}

    def _settle(self, committed):
        if self.pending is None:
            return
        token, st, cells, recorded = self.pending
        self.pending = None
        if committed and token == committed:
            self.state = st
        else:
            self.cells = cells + self.cells
            history.unrecord(self, recorded)


def _ipython_name(k):
    """IPython's own names (In, Out, _, _i3, _7, ...) and dunders. The regex runs only on names that
    start with "_", which user names rarely do."""
    return k in _IPY_NAMES or k[:1] == "_" and (_IPY_RE.match(k) is not None or k[:2] == "__" and k[-2:] == "__")


def _setup_of(shell):
    """The session set-up the server sent with this cell's execute_request (its metadata's
    ``carryover_setup``), or None. The server sends it with a session's first cell in a fresh pooled
    kernel instead of a set-up request of its own: one round trip less before the first result."""
    kernel = getattr(shell, "kernel", None)
    get_parent = getattr(kernel, "get_parent", None)
    if get_parent is None:
        return None
    md = (get_parent("shell") or {}).get("metadata") or {}
    setup = md.get("carryover_setup")
    return setup if isinstance(setup, dict) else None


def _apply_setup(setup):
    """Points the kernel at its session before the cell runs: working directory and environment. (The
    execution counter is not set here: ipykernel has announced it in execute_input already, so the
    server uses this path only where the counter is right.)"""
    cwd = setup.get("cwd")
    try:
        if cwd:
            os.makedirs(cwd, exist_ok=True)
            os.chdir(cwd)
        os.environ.update({str(k): str(v) for k, v in (setup.get("env") or {}).items()})
        kernelops.forget_listings()
    except OSError as e:
        raise RuntimeError(f"carryover: the session's working directory {cwd!r} could not be set: {e}") from None


def template_warm():
    """What a kernel template (kernel/template) does once, after its imports and before it forks:
    indexes the modules' objects (owners.py). Indexing reads every module's attributes, which bumps
    each object's reference count and back: done in each kernel (its first preimport or snapshot),
    that copied every page holding a module object, ~28 MiB of numpy + pandas + matplotlib per kernel,
    byte-identical to the template's. Done here, the index is the children's too, shared
    copy-on-write, and a child indexes again only the modules it imports later or its own start
    changed (owners.warm)."""
    owners.warm()


def template_child_io():
    """What a kernel forked from a template does once its output streams exist (the template calls
    it after ipykernel's init_io): gives them the flush that returns at once with nothing to send
    (replies.py), which the install would give them later. The kernel app's start flushes both
    (IPython's init_code), and so does the install's request, each flush a round trip to the IOPub
    thread for nothing written (init_code's median 4.9 -> 3.6 ms on a busy 2-core node)."""
    replies.quick_streams()


def install(spool_dir, shell=None, spool_host=None):
    """Creates the agent for this kernel, binds it as __carryover__ and tracks cells via pre_run_cell.
    spool_dir is the spool as this kernel sees it; spool_host as the Go server sees it (echoed back in
    answers so the server needs no per-kernel state)."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    old = shell.user_ns.get("__carryover__")
    if old is not None and hasattr(old, "pre_run_cell"):
        for ev in ("pre_run_cell", "post_run_cell"):
            try:
                shell.events.unregister(ev, getattr(old, ev))
            except (ValueError, AttributeError):
                pass
    # The kernel's own settings, before any cell: kept from the agent replaced, which may have run cells.
    libstate.baseline(getattr(old, "libbase", None))
    agent = Agent(shell, spool_dir)
    if old is not None and hasattr(old, "_own"):
        agent._own = old._own  # the kernel's own, taken before the replaced agent ran any cell
    agent.libbase = libstate.base()
    agent.spool_host = spool_host or spool_dir
    shell.events.register("pre_run_cell", agent.pre_run_cell)
    shell.events.register("post_run_cell", agent.post_run_cell)
    shell.user_ns["__carryover__"] = agent
    shell.user_ns_hidden["__carryover__"] = agent
    kernelops.install_renderer_hooks()
    replies.install(shell)
    return agent
