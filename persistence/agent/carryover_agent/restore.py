"""The ``restore`` op: imports by reference, then session definitions (in dependency order, retried
while progress is made), data groups and interpreter state, each group loaded independently from
the files Go assembled (buffers mapped copy-on-write, never copied). The restored groups become the
agent's state, so the next snapshot writes only what changes after the restore."""

import base64
import importlib
import io
import json
import mmap
import os
import pickle
import sys
import time

from . import figures, history, lazy, libstate, owners, replay, shared, widgetstate
from . import arrivals
from .containers import holders
from .common import BIG_GRAPH, _cwd, _ms, _reason, _shared_types, dill
from .dirty import TRACK_MIN
from .groups import _Group, _State
from .interp import _apply_state
from .liveids import sharing_ids, temporaries
from .pickling import _MissingDep, _persistent_load, pickle_one
from .reducers import _DISPATCH_TYPES, _library_dispatch
from .containers.sliced import forget_rebuilt, seed


def op_restore(agent, a):
    t0 = time.perf_counter()
    a = _args(a)
    agent.pending = None
    agent.cells = []
    if a.get("clear"):
        for k in list(agent.ns):
            if agent._keep(k, agent.ns[k]):
                del agent.ns[k]
    # What the checkpoint said restores differently ("saved, but ..."): kept on the groups so every
    # later checkpoint still says it (the restored value now compares equal to its own round trip).
    agent._warned = {s["name"]: s for s in a.get("skipped") or ()
                     if isinstance(s, dict) and str(s.get("reason", "")).startswith("saved, but")}
    history.reset(agent)  # the checkpoint's own history comes back with its state groups
    agent._fingerprints = {}  # and the fingerprints of what it skipped
    r = _Restore(agent, arrivals.Arrivals(a.get("await")))
    groups = a.get("groups") or []
    widgetstate.begin_restore()  # a definition may hold a widget not re-created yet
    try:
        _load(agent, r, groups)
    finally:
        widgetstate.end_restore()
        forget_rebuilt()
        lazy.release_untaken()  # the sliced containers rebuilt by the loads: held until now, on every path
        shared.release_untaken()
    _restore_env(a)
    st = r.st
    cur = agent._user_names()
    st.ids = {n: id(v) for n, v in cur.items()}
    # After the ids: every name the replay binds then counts as changed, so the next checkpoint saves
    # (or names as skipped) what it rebuilt.
    replayed = _replay(agent, a, r)
    for g in st.groups.values():
        if g.ref:
            st.known.add(g.ref)
            st.known.update(g.chunks)
    st.recheck_all = True
    agent.state = st
    return {"restored": sorted(r.restored), "failed": r.failed, "cwd": _cwd(), "replay": replayed,
            "timings": {"load_ms": _ms(t0), "wait_ms": round(r.arrivals.waited * 1000, 3)}, "groups": r.timings}


def _load(agent, r, groups):
    """Loads the checkpoint's groups: sys.path first (imports may need it), imports, definitions,
    the libraries' settings (a value's module object is compared with the module's after them),
    data (each group as soon as its files are there: into a new kernel Go is still writing them,
    arrivals.py), and the rest of the state last. A library imported here whose settings the checkpoint
    does not hold goes back to its defaults."""
    def apply(names, obj):
        _apply_state(agent.shell, names[0], obj)

    def setting(g, early):
        s = libstate.BY_NAME.get(g["n"][0])
        return g["k"] == "state" and s is not None and s.early == early

    for g in groups:
        if setting(g, True):
            r.load_into(g, retry=False, apply=apply)
    for g in groups:
        if g["k"] == "imp":
            r.load_import(g)
    r.load_defs([g for g in groups if g["k"] == "def"])
    for g in groups:
        if setting(g, False):
            r.load_into(g, retry=False, apply=apply)
    present = {g["n"][0] for g in groups if g["k"] == "state"}
    for name, reason in libstate.reset_absent(present):
        r.failed.append({"name": name, "type": "state", "reason": reason})
    data = [g for g in groups if g["k"] == "data"]
    while data:  # in the order their files arrive (Go writes the pickle streams, a load's CPU, first)
        r.load_into(data.pop(r.arrivals.first_ready(data)), retry=False)
    for g in groups:
        if g["k"] == "state" and g["n"][0] not in libstate.BY_NAME:
            r.load_into(g, retry=False, apply=apply)


def _replay(agent, a, r):
    """Rebuilds what the checkpoint skipped (or failed to load) by replaying the turns that made it
    (replay.py), unless Go switched it off ("replay": false)."""
    missing = {s["name"] for s in a.get("skipped") or () if isinstance(s, dict)
               and not str(s.get("reason", "")).startswith("saved, but")}
    missing |= {f["name"] for f in r.failed if isinstance(f, dict) and "name" in f}
    missing = {n for n in missing if n.isidentifier() and n not in agent.ns}
    if not missing or a.get("replay") is False:
        return {"recomputed": [], "not_replayed": []}
    try:
        return replay.rebuild(agent, missing, float(a.get("replay_budget_ms") or 10000))
    except Exception as e:  # the replay is a bonus: its failure must not fail the restore
        return {"recomputed": [], "not_replayed": [{"name": n, "reason": "not replayed: %s" % _reason(e)}
                                                  for n in sorted(missing)]}
def _args(a):
    """The arguments, read from the spool file Go names in "args_file" (Go sends them so: inline, the
    megabytes of descriptors and pickles were a string literal IPython transformed and compiled)."""
    path = a.get("args_file")
    if not path:
        return a
    with open(path, "rb") as f:
        out = json.loads(f.read())
    try:
        os.unlink(path)
    except OSError:
        pass
    return out


def _restore_env(a):
    cwd = a.get("cwd")
    if cwd and os.path.isdir(cwd):
        os.chdir(cwd)
    env = a.get("env") or {}
    for k, v in (env.get("set") or {}).items():
        os.environ[k] = v
    for k in env.get("unset") or ():
        os.environ.pop(k, None)


class _Restore:
    """One restore in progress: what was restored or failed, per-group timings, the new state."""

    def __init__(self, agent, arrivals):
        self.agent = agent
        self.arrivals = arrivals
        self.ns = agent.ns
        self.restored, self.failed, self.timings = [], [], []
        self.st = _State()
        self.st.full = False
        self.load = _persistent_load(agent.ns)

    def load_import(self, g):
        try:
            obj = importlib.import_module(g["m"])
            if g.get("a"):
                for part in g["a"].split("."):
                    obj = getattr(obj, part)
            for n in g["n"]:
                self.ns[n] = obj
            self.restored.extend(g["n"])
            grp = _Group(g["n"], "imp")
            grp.mod, grp.attr, grp.types = g["m"], g.get("a"), tuple(g.get("t") or ())
            self.st.groups[frozenset(grp.names)] = grp
        except Exception as e:
            self.failed.extend({"name": n, "type": "module", "reason": _reason(e)} for n in g["n"])

    def load_defs(self, defs):
        """Session definitions in dependency order: retried while progress is made."""
        pending = list(defs)
        while pending:
            progress = False
            later = []
            for g in pending:
                if self.load_into(g, retry=True) is None:
                    later.append(g)
                else:
                    progress = True
            if not progress:
                for g in later:
                    self.load_into(g, retry=False)
                break
            pending = later

    def _fail(self, g, reason):
        names = g["n"]
        self.failed.extend({"name": n, "type": (g.get("t") or ["?"] * len(names))[i], "reason": reason}
                           for i, n in enumerate(names))
        _cleanup(g)
        return False

    def load_into(self, g, retry, apply=None):
        """Loads one group: True when loaded, False when it failed (named in failed), None when it
        needs a session definition not restored yet and retry is set."""
        self.arrivals.wait(g)  # outside the try: a failed assembly fails the restore, not the group
        t = time.perf_counter()
        names = g["n"]
        live = None
        try:
            desc = g["desc"]
            obj, u, bufs = _unpickle(g, desc, self.load)
        except _MissingDep as e:
            if retry:
                return None
            return self._fail(g, "needs %s, which could not be restored" % e.args[0])
        except Exception as e:
            return self._fail(g, _reason(e))
        _cleanup(g)
        grp_ids = None
        if apply is not None:
            try:
                apply(names, obj)
            except Exception as e:
                self.failed.extend({"name": n, "type": "state", "reason": _reason(e)} for n in names)
                return False
        else:
            values = [obj] * len(names) if g["k"] == "def" or len(names) == 1 else list(obj)
            live = self._owned(g, values) if g.get("o") else None
            for n, v in zip(names, live or values):
                self.ns[n] = v
            self.restored.extend(names)
            sliced = _seed_sliced(self.agent, names, values, desc) if g["k"] == "data" and live is None else None
            objs = _memo_objects(u, desc)
            grp_ids = sliced if sliced is not None else _loaded_ids(objs, obj, live or values, desc)
            _seed(self.agent._tracker, objs, bufs, desc)
        self.timings.append({"n": names, "ms": _ms(t)})
        grp = self._record(g, desc, grp_ids if apply is None and g["k"] == "data" else None)
        if apply is None and g["k"] == "data":
            grp.figs = figures.loaded(objs)
            grp.owners = g["o"] if live is not None else None
        return True

    def _owned(self, g, copies):
        """The module objects the group's names were bound to (its "o": name -> "module:attribute"),
        when each pickles to the same bytes as the restored copy (the library's settings are back by
        now); else None, and the copies stay, each named in failed with the reason."""
        names, refs = g["n"], g["o"]
        try:
            if set(refs) != set(names):
                raise ValueError("the group holds other values too")
            live = [owners.resolve(refs[n]) for n in names]
            mine = pickle_one(self.agent, names, live)
            saved = pickle_one(self.agent, names, copies)
            if not _same_pickle(mine, saved):
                raise ValueError("the module's object differs from the saved value (the session changed it, "
                                 "and that state is not carried)")
            return live
        except Exception as e:
            types = g.get("t") or ["?"] * len(names)
            self.failed.extend({"name": n, "type": types[i], "reason": "restored as a copy, not as %s: %s"
                                % (refs.get(n, "?").replace(":", "."), _reason(e))}
                               for i, n in enumerate(names) if n in refs)
            return None

    def _record(self, g, desc, ids):
        """The loaded group as the agent's state. Its ids (from the unpickler's memo) let a later
        turn's new object that shares with it (a model fitted on X, an optimizer over a model's
        parameters) merge with it, whatever names the cell used, as in a kernel never restored."""
        names = g["n"]
        grp = _Group(names, g["k"])
        grp.ref = g["r"]
        if ids is not None:
            grp.ids = ids
            grp.warn = tuple(self.agent._warned[n] for n in names if n in self.agent._warned)
        grp.types = tuple(g.get("t") or ())
        grp.chunks = tuple(sorted({c[0] for c in desc["p"]} | {c[0] for b in desc["b"] for c in b[2]}))
        grp.size = sum(c[1] for c in desc["p"]) + sum(b[1] for b in desc["b"])
        self.st.groups[frozenset(names)] = grp
        return grp


def _same_pickle(a, b):
    """Whether two _Pickled hold the same bytes: stream and out-of-band buffers."""
    return (a.fmt == b.fmt and a.data == b.data and len(a.buffers) == len(b.buffers)
            and all(memoryview(x).tobytes() == memoryview(y).tobytes() for x, y in zip(a.buffers, b.buffers)))


def _unpickle(g, desc, load):
    """(object, unpickler, buffers) of one group: the pickle stream from ``pd`` (inline) or ``pf``,
    each out-of-band buffer mapped from its file of ``bf``, lazily mapped (``lb``: lazy.py) or
    mapped from the node's shared copy (``sb``: shared.py)."""
    if "pd" in g:
        data = base64.b64decode(g["pd"])
    else:
        with open(g["pf"], "rb") as f:
            data = f.read()
    parts = {}
    for p in g.get("bp") or ():
        parts.setdefault(p["j"], []).append((p["f"], p["o"]))
    lazy_at = {r["j"]: r["id"] for r in g.get("lb") or ()}
    shared_at = {r["j"]: r["id"] for r in g.get("sb") or ()}
    bufs = [lazy.take(lazy_at[j]) if j in lazy_at else shared.take(shared_at[j]) if j in shared_at
            else _map_file(p, parts.get(j, ())) for j, p in enumerate(g.get("bf") or ())]
    if desc["f"] == "d":
        u = dill.Unpickler(io.BytesIO(data), buffers=bufs)
    else:
        u = pickle.Unpickler(io.BytesIO(data), buffers=bufs)
    u.persistent_load = load
    return u.load(), u, bufs


def _seed_sliced(agent, names, values, desc):
    """The ids of the group's container rebuilt from slices (its cache seeded), or None."""
    for n, v in zip(names, values):
        ids = seed(agent, n, v, desc, holders.seed_holder)
        if ids is not None:
            return ids
    return None


def _seed(tracker, objs, bufs, desc):
    """Hands the dirty-page tracker the chunk hashes of large restored buffers (from the group's
    descriptor), keyed to the arrays built straight over them."""
    np = sys.modules.get("numpy")
    if np is None:
        return
    at = {}
    for j, b in enumerate(bufs):
        chunks = desc["b"][j][2] if j < len(desc["b"]) else ()
        if isinstance(b, mmap.mmap) and len(b) >= TRACK_MIN and len(chunks) > 1:
            import ctypes

            at[ctypes.addressof(ctypes.c_char.from_buffer(b))] = (len(b), chunks)
    if not at:
        return
    for o in objs:
        if type(o) is np.ndarray and o.base is not None and not isinstance(o.base, np.ndarray):
            hit = at.get(o.__array_interface__["data"][0])
            if hit and o.nbytes == hit[0] and (o.flags.c_contiguous or o.flags.f_contiguous):
                tracker.seed(o, o.__array_interface__["data"][0], hit[0], hit[1][0][1], hit[1])


def _memo_objects(u, desc):
    """The objects an unpickler memoised (the ones the pickler memoised), or none when the pickler
    said its huge graph held no array, tensor or figure (the descriptor's "m": 0): the objects are
    looked through for those only, and copying a memo of 750,000 records' objects and the passes
    over them cost half their unpickling."""
    if desc.get("m") == 0 and sum(c[1] for c in desc["p"]) > BIG_GRAPH:
        return []
    memo = getattr(u, "memo", None)
    try:
        return list((memo.copy() if hasattr(memo, "copy") else dict(memo or {})).values())
    except Exception:
        return []


def _loaded_ids(objs, obj, values, desc):
    """The ids a restored group's objects share by: the same rule as _pickle_one's, applied to the
    unpickler's memo (the objects the pickler memoised) instead of the pickler's."""
    _library_dispatch()  # the group may have imported numpy or torch
    shared = _shared_types()
    ids = set()
    if sum(c[1] for c in desc["p"]) <= BIG_GRAPH:
        ids = sharing_ids(map(id, objs), objs, shared, obj)
        ids -= temporaries(objs, 2)  # held by the unpickler's memo and by objs (liveids)
    else:
        for v in values:
            kids = v.values() if isinstance(v, dict) else v if isinstance(v, (list, set, tuple)) else ()
            ids.update(id(k) for k in kids if not isinstance(k, shared) and type(k) is not object)
        arrays = tuple(t for t in (_DISPATCH_TYPES.get("ndarray"), _DISPATCH_TYPES.get("tensor")) if t)
        if arrays:
            ids.update(id(o) for o in objs if isinstance(o, arrays))
    ids.update(id(v) for v in values if not isinstance(v, shared))
    return frozenset(ids - owners.carried_ids())


def _map_file(path, parts=()):
    """Maps a restored buffer copy-on-write (no copy until written) and unlinks its files. parts are
    (file, offset) of the later parts of a buffer Go assembled as several files (written in
    parallel): the first file has the buffer's whole size, and each part is mapped over its place in
    that mapping, so the buffer is one range of memory. A part that cannot be mapped fails the group
    (its place would read as zeros)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                m = bytearray()
            else:
                m = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
        for p, off in parts:
            _map_over(m, p, off)
    finally:
        for p in [path] + [p for p, _ in parts]:
            try:
                os.unlink(p)
            except OSError:
                pass
    return m


_MAP_FIXED = 0x10  # Linux; the mmap module does not name it


def _map_over(m, path, off):
    """Maps file path copy-on-write over m[off:off + its size] (MAP_FIXED replaces those pages)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    with open(path, "rb") as f:
        n = os.fstat(f.fileno()).st_size
        if off % mmap.PAGESIZE or off < 0 or n <= 0 or off + n > len(m):
            raise ValueError("buffer part %s: %d bytes at %d do not fit a %d-byte buffer" % (path, n, off, len(m)))
        view = ctypes.c_char.from_buffer(m)
        try:
            at = ctypes.addressof(view) + off
        finally:
            del view
        got = libc.mmap(at, n, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | _MAP_FIXED, f.fileno(), 0)
        if got != at:
            e = ctypes.get_errno()
            raise OSError(e, "mapping buffer part %s: %s" % (path, os.strerror(e)))


def _cleanup(g):
    for p in arrivals.paths(g):
        try:
            os.unlink(p)
        except OSError:
            pass
