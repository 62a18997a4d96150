"""The ``snapshot`` op: work out what the turn could have changed (detect), pickle it (serialize),
cut it into chunks and hand Go the ones it does not have (write), and keep the new state pending
until Go says it committed it. See the package docstring for the protocol."""

import os
import shutil
import re
import struct
import sys
import time
import types

from . import figures, fingerprint, heldfiles, history, lazy, libstate, owners, quiet, widgetstate
from .analysis import analyze
from .common import DEFAULT_CHUNK, RECHECK_BUDGET, SMALL_GROUP, _cwd, _reason, _shared_types, _typename
from .groups import _KIND_ORDER, _Group, _State, small_print
from .interp import _capture_state
from .pickling import _import_ref, _is_session_def, def_digest, dump_digest, pickle_data, pickle_def, pickle_one, pickle_plain
from .reducers import _DISPATCH, _library_dispatch
from .containers.objarrays import purge as purge_arrays
from .owners import owner_of
from .containers.sliced import purge, reset_stats
from .containers.sliced import timings as sliced_timings
from .spool import describe, emit, forget_ahead
from .verify import _verify


def op_snapshot(agent, a):
    t0 = time.perf_counter()
    agent._tracker.reset_stats()
    reset_stats()
    agent._tracker.purge()
    lazy.reap()
    agent._settle(a.get("committed") or "")
    token = a["token"]
    cs = int(a.get("chunk_size") or DEFAULT_CHUNK)
    cells, agent.cells = agent.cells, []
    recorded = history.record(agent, cells)
    prev = agent.state
    cur = agent._user_names()
    _prepare(agent, cur)
    purge(agent, cur)
    purge_arrays()
    cand = _candidates(agent, cells, cur, prev)
    agent._parsed.clear()  # the cells taken are analysed
    detect = time.perf_counter() - t0

    t1 = time.perf_counter()
    new_groups, skipped, results = _serialize(agent, cand, cur, prev, t1)
    serialize = time.perf_counter() - t1

    t2 = time.perf_counter()
    outdir = os.path.join(agent.spool, token)
    try:
        chunks_out, saved, hash_t = _write(agent, results, new_groups, cur, prev, outdir, cs)
    except BaseException:
        # A write that failed (a full disk: ENOSPC) leaves no partial spool files behind: Go never
        # reads a failed snapshot's, so nothing else would remove them before the kernel ends, and
        # on a full disk they would hold the space the next checkpoint needs.
        shutil.rmtree(outdir, ignore_errors=True)
        raise
    forget_ahead()  # slices compressed ahead that Go had already
    _carry_over(prev, cur, new_groups, skipped)
    heldfiles.flush_held(cur, skipped)  # before Go reads the workspace: a skipped generator's writes
    write = time.perf_counter() - t2 - hash_t
    serialize += hash_t

    st = _new_state(new_groups, cur, skipped)
    st.small = _small_prints(results, skipped, cur, prev)
    agent.pending = (token, st, cells, recorded)
    saved_set = set(saved) | {n for k, g in new_groups.items() if g.kind == "imp" and k not in prev.groups for n in g.names}
    nsaved = sum(len(g.names) for g in new_groups.values() if g.kind != "state")
    groups = sorted(new_groups.values(), key=lambda g: (_KIND_ORDER[g.kind], g.names))
    return {
        "token": token,
        "spool_host": agent.spool_host,
        "groups": [g.entry() for g in groups],
        "saved": sorted(saved_set),
        "unchanged": nsaved - len(saved_set),
        "skipped": [skipped[n] for n in sorted(skipped)],
        "chunks": chunks_out,
        "cwd": _cwd(),
        "env": _env_diff(agent),
        "quiet": quiet.quiet(agent._own),
        "timings": dict({"detect_ms": round(detect * 1000, 3), "serialize_ms": round(serialize * 1000, 3),
                         "write_ms": round(write * 1000, 3)}, **_dirty_timings(agent),
                        **sliced_timings()),
    }


def _prepare(agent, cur):
    """What pickling needs to know this turn: the session definitions by id (pickled by name), the
    types that never glue groups, the reducers of libraries imported since the last turn."""
    agent._defnames = {id(v): k for k, v in cur.items() if _is_session_def(v) and getattr(v, "__qualname__", "") == k}
    for k, v in cur.items():
        if _is_session_def(v) and id(v) not in agent._defnames:
            agent._defnames[id(v)] = k
    agent._shared = _shared_types()
    _library_dispatch()
    widgetstate.dispatch(_DISPATCH)  # ipywidgets' widgets by model id, wherever they are


def _candidates(agent, cells, cur, prev):
    """Names the turn may have changed: rebound or new, touched by the cells, everything after a
    dynamic cell or on a fresh agent, and every name of a group one of those belongs to."""
    touched, dynamic = analyze(agent.shell, cells, cur, agent._parsed)
    p2g = prev.name2group()
    cand = set()
    for n, v in cur.items():
        if prev.ids.get(n) != id(v):
            cand.add(n)
    if dynamic or prev.full:
        cand |= set(cur)
    for n in touched & cur.keys() - cand:  # read, maybe written: unless a small array as saved (small_print)
        fp = prev.small.get(n)
        if fp is None or small_print(cur[n]) != fp:
            cand.add(n)
    cand |= figures.changed(prev.groups.values(), cur)  # figures changed through pyplot, unnamed
    gone = prev.ids.keys() - cur.keys()
    for n in cand | gone:
        g = p2g.get(n)
        if g is not None:
            cand |= {m for m in g.names if m in cur}
    return cand


def _serialize(agent, cand, cur, prev, t1):
    """Import groups for the candidates that are imports; pickles of the session definitions, data
    groups, small unchanged groups (re-checked within a budget) and interpreter state."""
    new_groups = {}
    skipped = {}
    results = []  # _Pickled ready to chunk
    data_names = []
    by_def = {}
    for n in sorted(cand):
        v = cur[n]
        ref = _import_ref(v)
        if ref is not None:
            g = _Group([n], "imp")
            g.mod, g.attr = ref
            g.types = (_typename(v),)
            new_groups[frozenset(g.names)] = g
        elif _is_session_def(v):
            by_def.setdefault(id(v), []).append(n)
        else:
            data_names.append(n)
    for ns_ in by_def.values():
        full = sorted(k for k, v in cur.items() if v is cur[ns_[0]])
        pk = pickle_def(agent, full, cur[ns_[0]], skipped)
        if pk is not None:
            results.append(pk)
    results.extend(pickle_data(agent, data_names, cur, prev, prev.name2group(), skipped))
    _by_reference(data_names, cur, new_groups, skipped)
    # Small unchanged groups: re-pickle within a budget (mutations through aliases).
    picked = {n for r in results for n in r.names} | set(skipped)
    results.extend(_recheck(agent, prev, cur, picked, skipped, t1))
    results.extend(_pickle_state(agent, skipped, _still_skipped(prev, cur, new_groups, results, skipped)))
    return new_groups, skipped, results


def _write(agent, results, new_groups, cur, prev, outdir, cs):
    """Chunks and hashes every pickled group, emits the chunks Go does not have, and records which
    names were saved (their group's descriptor changed). Returns (chunks, saved, seconds hashing)."""
    hash_t = 0.0
    chunks_out = []
    emitted = set()
    known = prev.known
    saved = []
    made_dir = [False]
    for r in results:
        th = time.perf_counter()
        if r.kind == "data":
            r.owners = {n: "%s:%s" % ref for n in r.names for ref in (owner_of(cur[n]),) if ref is not None} or None
        g, pieces = _describe(agent, r, cs, cur)
        g.digest = r.digest
        hash_t += time.perf_counter() - th
        old = prev.groups.get(frozenset(g.names))
        if g.kind == "data":
            g.warn = tuple(_warnings(r, g, old, cur, prev))
            g.warn += _owned(g, r, cur)
        if old is not None and old.ref == g.ref:
            g.size = old.size if not g.size else g.size
        elif g.kind != "state":
            saved.extend(g.names)
        new_groups[frozenset(g.names)] = g
        for h, piece, children in pieces:
            if h in known or h in emitted:
                continue
            emitted.add(h)
            chunks_out.append(emit(outdir, made_dir, h, piece, children))
        r.keep = None
    return chunks_out, saved, hash_t


def _describe(agent, r, cs, cur):
    """describe(), kept on a state pickle that has no out-of-band buffer: _pickle_state reuses the
    same _Pickled while the state is unchanged (most turns: ~30 of them, random's and numpy's
    generators, the libraries' settings, the history), and the same bytes give the same chunks and
    descriptor, so they are hashed once, not at every turn. Only a buffer can change under the same
    object (and the dirty tracker follows buffers), so a pickle with one is described each time."""
    if r.kind != "state" or r.buffers:
        return describe(agent._tracker, r, cs, cur)
    if r.described is None or r.described[0] != cs:
        r.described = (cs,) + describe(agent._tracker, r, cs, cur)
    return r.described[1], r.described[2]


def _owned(g, r, cur):
    """Keeps the group's module objects (owners.py) when all its names are and it is small enough to
    be compared at a restore. Otherwise they are saved by value in their group, as any value: a
    module's object shared with the session's values (model.dist = norm; a sympy Symbol, which is
    also a module's attribute through sympy's cache, inside an expression) keeps that sharing."""
    own = g.owners
    if own and (len(own) != len(g.names) or not owners.small(r)):
        g.owners = None
    return ()


def _by_reference(names, cur, new_groups, skipped):
    """A module's object that cannot be pickled (sys.stdout, a module's lock) is saved as a reference
    to its module attribute, as a function is, and named: its own state is not saved."""
    for n in names:
        s = skipped.get(n)
        ref = owner_of(cur[n]) if s is not None else None
        if ref is None:
            continue
        g = _Group([n], "imp")
        g.mod, g.attr = ref
        g.types = (_typename(cur[n]),)
        g.warn = ({"name": n, "type": g.types[0], "reason": "saved, but as a reference to %s.%s, which it is: its "
                   "own state is not saved (%s)" % (ref[0], ref[1], s["reason"])},)
        new_groups[frozenset(g.names)] = g
        del skipped[n]


def _warnings(r, g, old, cur, prev):
    """A data group's "saved, but ..." entries: _verify's findings (kept while the group is
    unchanged), the reducers' notes, and what a restore said of values not rebound since."""
    warn = old.warn if old is not None and old.ref == g.ref and old.warn is not None else _verify(r, cur)
    if r.notes:
        warn = tuple(warn) + tuple({"name": n, "type": _typename(cur[n]), "reason": "saved, but " + "; ".join(r.notes)}
                                   for n in r.names if n not in {w["name"] for w in warn})
    if old is not None and old.warn:  # a value restored degraded compares equal to itself now
        seen = {w["name"] for w in warn}
        warn = tuple(warn) + tuple(w for w in old.warn if w["name"] not in seen and w["name"] in cur
                                   and prev.ids.get(w["name"]) == id(cur[w["name"]]))
    return warn


def _carry_over(prev, cur, new_groups, skipped):
    """Reuses every previous group not re-checked (and its names' skip entries); every group's
    warnings go to skipped, so a value that restores as something else is named at every checkpoint."""
    done = {n for g in new_groups.values() for n in g.names} | set(skipped)
    for key, g in prev.groups.items():
        if key in new_groups:
            continue
        if all(n in cur and n not in done for n in g.names):
            new_groups[key] = g
            done |= set(g.names)
    for n in cur:
        if n not in done and n in prev.skipped and prev.ids.get(n) == id(cur[n]):
            skipped[n] = prev.skipped[n]
    for g in new_groups.values():
        for w in g.warn or ():
            skipped.setdefault(w["name"], w)


def _new_state(new_groups, cur, skipped):
    st = _State()
    st.full = False
    st.groups = new_groups
    st.ids = {n: id(v) for n, v in cur.items()}
    st.skipped = skipped
    for g in new_groups.values():
        if g.ref:
            st.known.add(g.ref)
            st.known.update(g.chunks)
    return st


def _small_prints(results, skipped, cur, prev):
    """name -> small_print of each small array pickled now; a name carried over (not pickled) keeps
    the print its saved bytes were made from, never its current value's, so a change made through
    an alias and not yet saved is still found when a cell names it."""
    out = {n: fp for n, fp in prev.small.items() if n in cur and n not in skipped and prev.ids.get(n) == id(cur[n])}
    for r in results:
        for n in r.names:
            if n in cur and n not in skipped:
                fp = small_print(cur[n])
                if fp is None:
                    out.pop(n, None)
                else:
                    out[n] = fp
    return out


def _dirty_timings(agent):
    """How large buffers' changes were found: "uffd" (dirty-page scans), "hash" (every chunk hashed,
    with the reason), "mixed", or "" when no buffer was large enough to track."""
    st = agent._tracker.stats
    fb = st.get("fallback", "")
    mode = ("mixed" if fb else "uffd") if st.get("tracked") else ("hash" if fb else "")
    out = {"dirty_mode": mode, "tracked_bytes": st.get("tracked", 0), "rehashed_bytes": st.get("rehashed", 0),
           "hashed_bytes": st.get("hashed", 0)}
    if fb:
        out["dirty_fallback"] = fb
    return out

def _env_diff(agent):
    """The environment's changes since the kernel started. os.environ decodes every key and value
    when iterated (0.2 ms a snapshot with 70 variables); its bytes mapping is compared in C first and
    an unchanged environment gives the last diff again."""
    env = os.environ
    data = getattr(env, "_data", None)
    last = agent._env_last
    if last is not None and data is not None and last[0] == data:
        return last[1]
    out = {"set": {k: v for k, v in env.items() if agent._env0.get(k) != v},
           "unset": sorted(k for k in agent._env0 if k not in env)}
    if data is not None:
        agent._env_last = (dict(data), out)
    return out


# State captured as fresh copies of plain data (tuples, ints, floats, arrays, bytes): when it equals
# the last capture, the last pickle of it is reused. A kernel with numpy loaded (every warm pool
# kernel) otherwise pickled and hashed numpy's generator state on every turn: 0.15 ms of a 0.5 ms
# snapshot. The libraries' settings (libstate.py) are captured so too, and the loaded extensions'
# names (every IPython kernel has storemagic loaded: pickled again at each turn before). Magics hold
# live functions that can change in place: always pickled.
_REUSABLE_STATE = frozenset(("@random", "@numpy.random", "@torch.random", "@extensions") + tuple(libstate.BY_NAME))


def _still_skipped(prev, cur, new_groups, results, skipped):
    """The names this checkpoint will name as skipped: this turn's, and those _carry_over keeps (a
    skipped value not rebound since, and not re-checked)."""
    if not prev.skipped:
        return skipped
    done = {n for r in results for n in r.names} | {n for g in new_groups.values() for n in g.names} | set(skipped)
    out = dict(skipped)
    for n, s in prev.skipped.items():
        if n in cur and n not in done and prev.ids.get(n) == id(cur[n]):
            out[n] = s
    return out


def _pickle_state(agent, skipped, all_skipped=None):
    """The interpreter state (_capture_state), one "state" group per item, and the fingerprints of
    the skipped variables (fingerprint.py)."""
    out = []
    try:
        items = _capture_state(agent.shell, skipped) + history.state_items(agent)
        items += fingerprint.state_items(agent, skipped if all_skipped is None else all_skipped)
    except Exception as e:
        skipped["@state"] = {"name": "@state", "type": "state", "reason": _reason(e)}
        return out
    cache = agent._state_cache
    for name, value in items:
        hit = cache.get(name)
        key = _freeze(value) if name in libstate.BY_NAME else value
        if hit is not None and (hit[0] is value or _same(hit[2], key)):
            out.append(hit[1])
            continue
        try:
            r = pickle_plain([name], value) or pickle_one(agent, [name], [value])
        except Exception as e:
            skipped[name] = {"name": name, "type": "state", "reason": _reason(e)}
            continue
        r.kind, r.ids, r.keep = "state", frozenset(), None
        out.append(r)
        if name in _REUSABLE_STATE or name.startswith((history.PREFIX, history.RNG_PREFIX, fingerprint.PREFIX)):
            cache[name] = (value, r, key)  # history groups never change: the same tuple at every later turn
    return out


def _freeze(v):
    """A copy of a setting's capture that _same can compare and nothing can change later: its dicts
    and lists as tagged tuples (the capture may hold a library's own list)."""
    t = type(v)
    if t is dict:
        return ("<dict>",) + tuple((k, _freeze(x)) for k, x in v.items())
    if t is list or t is tuple:
        return ("<list>" if t is list else "<tuple>",) + tuple(map(_freeze, v))
    return v


_EXACT = {int, str, bytes, type(None), bool}  # for these, == means the same value of the same type
# The same object of these pickles to the same bytes (by reference, or immutable).
_BY_IDENTITY = (type, re.Pattern, types.FunctionType, types.BuiltinFunctionType)


def _same(a, b):
    """Whether two captures of plain state are certainly equal, so that pickling b gives a's bytes. Any
    doubt (another type, 0.0 against -0.0, a container it does not know) answers False: pickled
    again, never stale."""
    if type(a) is not type(b):
        return False
    if a is b and isinstance(a, _BY_IDENTITY):
        return True
    if type(a) is tuple:
        if len(a) != len(b):
            return False
        if set(map(type, a)) <= _EXACT and set(map(type, b)) <= _EXACT:
            return a == b  # random's 625 ints at C speed
        return all(_same(x, y) for x, y in zip(a, b))
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)  # the bits pickle writes: -0.0 is not 0.0
    if type(a) in _EXACT:
        return a == b
    np = sys.modules.get("numpy")
    if np is not None and type(a) is np.ndarray:
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return False


def _recheck(agent, prev, cur, picked, skipped, t_start):
    small = [g for g in prev.groups.values() if g.kind in ("data", "def") and g.size < SMALL_GROUP
             and all(n in cur and n not in picked for n in g.names)]
    if not small:
        return []
    small.sort(key=lambda g: g.names)
    out = []
    start = agent._recheck_pos % len(small)
    # Right after a restore every small group is re-checked once: objects rebuilt on load (a
    # DataFrame, a reopened file) may pickle to other bytes, and all such rewrites then land together.
    budget = 3600.0 if prev.recheck_all else RECHECK_BUDGET
    deadline = time.perf_counter() + budget
    i = 0
    for i in range(len(small)):
        if time.perf_counter() > deadline:
            break
        g = small[(start + i) % len(small)]
        try:
            if g.kind == "def":
                if g.digest is not None and def_digest(agent, cur[g.names[0]]) == g.digest:
                    continue  # as saved: dill need not run
                r = pickle_def(agent, list(g.names), cur[g.names[0]], skipped)
                if r is None:
                    continue
            else:
                values = [cur[n] for n in g.names]
                if g.digest is not None and dump_digest(agent, values) == g.digest:
                    continue  # the bytes saved: unchanged, the group carried over as it is
                r = pickle_one(agent, list(g.names), values)
        except Exception as e:
            for n in g.names:
                skipped[n] = {"name": n, "type": _typename(cur[n]), "reason": _reason(e)}
            continue
        out.append(r)
    else:
        i = len(small)
    agent._recheck_pos = start + i
    return out
