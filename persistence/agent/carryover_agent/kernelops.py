"""The session service's operations on a kernel besides checkpoints: point it at its session
(working directory, env vars, execution counter), set a run's own env vars and put them back, guard
what cells print, and list the namespace for the variable inspector. The server calls them like any
op (``__carryover__.call(op, json)``) with data, never with code of its own."""

import importlib
import os
import sys
import types

from . import widgetstate


def op_setup(agent, a):
    """A set-up request of its own (the server's sendSetup): makes and enters the working directory
    "cwd", adds "env" to the environment and, when "execution_count" is given, sets the counter the
    next cell gets. (A first cell carries the same set-up in its metadata instead: agent._apply_setup.)"""
    cwd = a["cwd"]
    os.makedirs(cwd, exist_ok=True)
    os.chdir(cwd)
    os.environ.update(a.get("env") or {})
    forget_listings()
    count = a.get("execution_count") or 0
    if count > 0:
        agent.shell.execution_count = count
    return {"ok": True}


def forget_listings():
    """Part of every set-up: the session's folders were just mounted where the kernel's import path
    may already have been listed (a sandbox's /skills and /workspace were its box's empty mount
    points while the kernel started). Python re-lists a directory only when its mtime changes, and
    the empty mount point and the mounted folder can share one (both made within one clock tick):
    the session's modules would then not be found. So the import system's listings are dropped here
    (importlib.invalidate_caches: each directory is listed again at its next use)."""
    importlib.invalidate_caches()


def op_env(agent, a):
    """Sets env vars: "vars" maps a name to its value, or to None to remove it (a run's own env is
    set before its cell and put back after it, so the session's env is what stays)."""
    for k, v in (a.get("vars") or {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    return {"ok": True}


def op_output_guard(agent, a):
    """Installs the output guard, once per kernel. ipykernel sends what a cell prints every 0.2 s as
    ONE iopub message, so ``print("x" * 10**9)`` becomes a 1 GB message the server must receive whole
    before it can drop it. The guard cuts stdout/stderr writes into pieces of at most "chunk" bytes
    (flushing as it goes) and drops what a cell prints past "cap" inside the kernel, with one visible
    notice. It protects against accidents, not malice: code can rebind sys.stdout (the server still
    caps what it keeps)."""
    cap = int(a["cap"])
    chunk = int(a.get("chunk") or 1 << 20)
    state = {"n": 0, "noticed": False}

    def reset(*_):
        state["n"] = 0
        state["noticed"] = False

    agent.shell.events.register("pre_run_cell", reset)

    def guard(stream):
        write, flush = stream.write, stream.flush

        def guarded(s):
            n = len(s)
            room = cap - state["n"]
            state["n"] += n
            keep = s if n <= room else s[: max(room, 0)]
            for i in range(0, len(keep), chunk):
                write(keep[i : i + chunk])
                if len(keep) > chunk:
                    flush()
            if len(keep) < n and not state["noticed"]:
                state["noticed"] = True
                flush()
                write("\n[carryover: output past run.max_output_bytes=%d was dropped in the kernel]\n" % cap)
                flush()
            return n

        stream.write = guarded

    for name in ("stdout", "stderr"):
        guard(getattr(sys, name))
    _unbounded_iopub(agent)
    return {"ok": True}


def _unbounded_iopub(agent):
    """Lifts the iopub socket's send high-water mark (libzmq's default: 1,000 messages). At the mark a
    PUB socket DROPS messages without a word: a cell flushing small prints faster than the server read
    them lost output from its record, and a dropped ``status: idle`` left its run waiting until its
    timeout. With no mark the messages queue in the kernel instead (what a cell prints is bounded by
    the guard's cap). libzmq (>= 4.2) applies the change to the server's existing connection; the
    socket belongs to the IOPub thread, so the change is made there."""
    thread = getattr(getattr(agent.shell, "kernel", None), "iopub_thread", None)
    sock, loop = getattr(thread, "socket", None), getattr(thread, "io_loop", None)
    if sock is None or loop is None:
        return
    import zmq

    loop.add_callback(lambda: sock.setsockopt(zmq.SNDHWM, 0))


def op_variables(agent, a):
    """The variable inspector's list: the user's names (not IPython's, not hidden, no modules) with
    type, shape, length and size in memory where cheap, at most 2000. It adds no name to the
    namespace and runs no cell hook (the server calls it silently, on an idle kernel)."""
    ns = agent.shell.user_ns
    hidden = getattr(agent.shell, "user_ns_hidden", {})
    out = []
    for name, v in list(ns.items()):
        if name.startswith("_") or name in hidden or name in ("In", "Out", "exit", "quit", "get_ipython"):
            continue
        if isinstance(v, types.ModuleType):
            continue
        t = type(v)
        d = {"name": name, "type": t.__qualname__ if t.__module__ == "builtins" else t.__module__ + "." + t.__qualname__}
        try:
            shape = getattr(v, "shape", None)
            if isinstance(shape, tuple) and all(isinstance(x, int) for x in shape):
                d["shape"] = list(shape)
        except Exception:
            pass
        try:
            if not isinstance(v, type) and hasattr(type(v), "__len__"):
                d["length"] = len(v)
        except Exception:
            pass
        try:
            mu = getattr(v, "memory_usage", None)
            nb = getattr(v, "nbytes", None)
            if callable(mu) and t.__module__.startswith("pandas"):
                # deep counts the strings of object columns; on huge frames that takes seconds
                m = mu(deep=len(v) <= 200000)
                d["bytes"] = int(m.sum()) if hasattr(m, "sum") else int(m)
            elif isinstance(nb, int):
                d["bytes"] = nb
            else:
                d["bytes"] = sys.getsizeof(v)  # shallow for containers
        except Exception:
            pass
        out.append(d)
        if len(out) >= 2000:
            break
    return out


# --- chart renderers -----------------------------------------------------------------------------
# The browser UI draws Plotly figures (application/vnd.plotly.v1+json) and Vega-Lite charts
# (application/vnd.vegalite.v4+json, v5) itself, with bundled libraries; it never runs the <script>
# that the libraries' default HTML renderers send. So, as JupyterLab's detection does, the kernel is
# set to send those types: when (and only when) the user's code imports the library, a hook run right
# after the module's own code picks its mimetype renderer. Nothing is imported at kernel start.
def _ipywidgets_compat(m):
    """Two gaps of ipywidgets 6 (Debian bookworm's) that later versions do not have:
    - it asks the frontend to confirm its widget JavaScript over a comm the frontend opens, and prints
      "Widget Javascript not detected" until it does. The UI's widget manager (web/src/widgets.js)
      speaks its protocol but cannot open that comm before the user's code imports ipywidgets, so the
      confirmation is given here;
    - its FloatProgress has no ``style`` (IntProgress has), which Debian's tqdm.notebook sets, so
      every tqdm.notebook bar failed with AttributeError; FloatProgress gets IntProgress's.
    Later ipywidgets have neither gap, and nothing is changed there."""
    w = getattr(m, "Widget", None)
    if w is not None and hasattr(w, "_version_validated"):
        w._version_validated = True
        w._version_frontend = "carryover"
    fp, ip = getattr(m, "FloatProgress", None), getattr(m, "IntProgress", None)
    style = ip.class_traits().get("style") if ip is not None else None
    if fp is not None and style is not None and "style" not in fp.class_traits():
        from traitlets import Instance

        t = Instance(style.klass, kw={}).tag(**style.metadata)
        t.class_init(fp, "style")
        t.subclass_init(fp)
        setattr(fp, "style", t)
    widgetstate.install_capture(m)  # what an Output widget shows, kept to be saved with it


_RENDERER_HOOKS = {
    "plotly.io._renderers": lambda m: setattr(m.renderers, "default", "plotly_mimetype"),
    "altair": lambda m: m.renderers.enable("mimetype"),
    "ipywidgets": _ipywidgets_compat,
}


class _HookedLoader:
    """A loader that runs its module's code, then the hook; everything else goes to the real one."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._hook(module)
        except Exception:  # an unknown version of the library: its own default stays
            pass


class _AfterImport:
    """A meta path finder that only wraps the loader of the modules named in hooks (once each)."""

    def __init__(self, hooks):
        self.hooks = dict(hooks)

    def find_spec(self, name, path=None, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        del self.hooks[name]
        spec.loader = _HookedLoader(spec.loader, hook)
        return spec


def install_renderer_hooks(hooks=None):
    """Sets the chart libraries' renderers: now for a library already imported, else on its import.
    Idempotent (a second agent install replaces the finder)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterImport)]
    pending = {}
    for name, hook in (hooks or _RENDERER_HOOKS).items():
        mod = sys.modules.get(name)
        if mod is None:
            pending[name] = hook
            continue
        try:
            hook(mod)
        except Exception:
            pass
    if pending:
        sys.meta_path.insert(0, _AfterImport(pending))


# --- the data viewer ------------------------------------------------------------------------------
_ROWS_MAX = 1000  # rows in one page, at most
_CELL_MAX = 500  # characters of one cell's text, at most


def _cell(v):
    """One value as JSON can carry it: numbers and booleans as they are (NaN, inf: null), the rest as
    text cut to _CELL_MAX characters."""
    if v is None or isinstance(v, bool):
        return v
    try:
        import numbers

        if isinstance(v, numbers.Integral):
            return int(v)
        if isinstance(v, numbers.Real):
            f = float(v)
            return f if f == f and f not in (float("inf"), float("-inf")) else None
    except Exception:
        pass
    s = v if isinstance(v, str) else str(v)
    return s if len(s) <= _CELL_MAX else s[:_CELL_MAX] + "…"


def _as_frame(name, v):
    """The variable as a pandas DataFrame (a view where it can be: nothing large is copied), or a
    ValueError saying why it is not a table."""
    t = type(v)
    mod = t.__module__ or ""
    if mod.startswith("pandas"):
        import pandas as pd

        if isinstance(v, pd.DataFrame):
            return v
        if isinstance(v, pd.Series):
            return v.to_frame(name=v.name if v.name is not None else name)
    if mod.startswith("numpy") and hasattr(v, "ndim"):
        import pandas as pd

        if v.ndim == 1:
            return pd.DataFrame({name: v}, copy=False)
        if v.ndim == 2:
            return pd.DataFrame(v, copy=False)
        raise ValueError("%s is a %d-D array: the data viewer shows 1-D and 2-D arrays" % (name, v.ndim))
    raise ValueError("%s is of type %s, not a DataFrame, Series or numpy array" % (name, t.__qualname__))


def op_rows(agent, a):
    """The data viewer's page (see _rows), or {"error": {"code", "message"}} in the API's codes: no
    such variable is not_found, a variable that is not a table or a bad column is invalid_request."""
    try:
        return _rows(agent, a)
    except KeyError as e:
        return {"error": {"code": "not_found", "message": str(e.args[0]) if e.args else "no such variable"}}
    except (ValueError, TypeError) as e:
        return {"error": {"code": "invalid_request", "message": str(e)}}


def _rows(agent, a):
    """One page of a DataFrame, Series or 1-D/2-D numpy array of the namespace, for the data viewer:
    rows [offset, offset+limit) after the search "q" (rows where any column's text contains it, case
    ignored) and the sort on column "sort" ("desc": descending). Only the page crosses to the server,
    so a frame of ten million rows never does. The order and the matches of the last request are kept
    (for the same object, sort and q), so paging through a sorted or searched frame sorts it once."""
    name = a["name"]
    ns = agent.shell.user_ns
    if name not in ns or name.startswith("_"):
        raise KeyError("no variable %r in the kernel" % name)
    v = ns[name]
    df = _as_frame(name, v)
    offset = max(int(a.get("offset") or 0), 0)
    limit = min(max(int(a.get("limit") or 50), 1), _ROWS_MAX)
    sort, desc, q = a.get("sort"), bool(a.get("desc")), (a.get("q") or "").strip()
    cols = [str(c) for c in df.columns]
    if sort is not None and sort not in cols:
        raise ValueError("no column %r in %s" % (sort, name))
    key = (id(v), len(df), sort, desc, q)
    cache = getattr(agent, "_rows_cache", None)
    if cache is None or cache[0] != key:
        order = None
        if q:
            import numpy as np

            mask = np.zeros(len(df), dtype=bool)
            for i in range(df.shape[1]):
                col = df.iloc[:, i]
                mask |= col.astype(str).str.contains(q, case=False, regex=False).to_numpy()
            order = np.flatnonzero(mask)
        if sort is not None:
            import numpy as np

            col = df.iloc[:, cols.index(sort)]
            if order is not None:
                col = col.iloc[order]
            idx = np.argsort(col.to_numpy(), kind="stable") if col.dtype.kind in "biufcmM" else None
            if idx is None:
                idx = col.reset_index(drop=True).sort_values(kind="stable", na_position="last").index.to_numpy()
            if desc:
                idx = idx[::-1]
            order = idx if order is None else order[idx]
        cache = (key, order)
        agent._rows_cache = cache
    order = cache[1]
    matched = len(df) if order is None else len(order)
    take = list(range(offset, min(offset + limit, matched))) if order is None else order[offset : offset + limit]
    page = df.iloc[take]
    return {
        "name": name,
        "type": type(v).__module__ + "." + type(v).__qualname__,
        "columns": [{"name": c, "dtype": str(df.dtypes.iloc[i])} for i, c in enumerate(cols)],
        "total_rows": int(len(df)),
        "matched_rows": int(matched),
        "offset": offset,
        "limit": limit,
        "index": [_cell(x) for x in page.index.tolist()],
        "rows": [[_cell(x) for x in row] for row in page.itertuples(index=False, name=None)],
    }
