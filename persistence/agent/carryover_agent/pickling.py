"""Pickling a group of variables: the C pickler (protocol 5, out-of-band buffers) with the agent's
reducers, dill as the fallback and for session definitions, and the ids an object graph shares by,
which decide what is pickled together (so ``b is a`` survives a restore).

The functions taking ``agent`` read three things from it, set at each snapshot: ``_shared`` (types
that never glue groups), ``_defnames`` (id -> name of session definitions, pickled by name) and
``_sentinels`` (module singletons pickled by reference); for a large list or dict, containers/sliced.py reads
more (its caches and the committed state's chunks)."""

import copyreg
import importlib
import io
from operator import itemgetter
import pickle
import sys
import types

from . import figures
from .containers import holders
from .classes import _reduce_class
from .liveids import died, sharing_ids, temporaries, untracked, young_begin, young_ids
from .common import BIG_BYTES, BIG_GRAPH, PROTOCOL, SMALL_GROUP, _ATOMS, _hash, _reason, _typename, dill
from .reducers import _DISPATCH, _NOTES, _SEEN, _OOBBytes
from .containers.objarrays import begin as begin_arrays
from .containers.objarrays import is_pre, take_nested_ids, take_pre
from .owners import carried_ids
from .history import Entry as _Entry
from .containers.sliced import SLICE_MIN, IdArray, pickle_sliced, pickle_sliced_group

def _is_session_def(v):
    return isinstance(v, (types.FunctionType, type)) and getattr(v, "__module__", None) == "__main__"


def _import_ref(v):
    """(module, attr) when v can be re-imported: modules, and classes/functions of real modules."""
    if isinstance(v, types.ModuleType):
        name = getattr(v, "__name__", None)
        if name and sys.modules.get(name) is v and name != "__main__":
            return (name, None)
        return None
    if not isinstance(v, (type, types.FunctionType, types.BuiltinFunctionType)):
        return None
    mod = getattr(v, "__module__", None)
    qual = getattr(v, "__qualname__", None)
    if not mod or not qual or mod == "__main__" or "<" in qual:
        return None
    m = sys.modules.get(mod)
    if m is None:
        return None
    obj = m
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    return (mod, qual) if obj is v else None


# Buffers smaller than this are pickled in-band. A figure holds thousands of tiny arrays (transforms,
# paths): out of band, each cost a hash, a descriptor and a chunk entry (12,897 of them, a third of a
# 300 ms re-pickle) for bytes that no later checkpoint dedupes.
SMALL_BUFFER = 4096


def _out_of_band(bufs):
    """A pickler's buffer_callback: large buffers (and those objarrays hashed) out of band, into
    bufs; small ones in the pickle stream (a true answer)."""
    def callback(b):
        if memoryview(b).nbytes < SMALL_BUFFER and not is_pre(b):
            return True
        bufs.append(b)
        return False
    return callback


class _DataPickler(pickle.Pickler):
    """The C pickler, protocol 5; open files through _reduce_file."""

    dispatch_table = _DISPATCH




if dill is not None:

    class _DillPickler(dill.Pickler):
        """dill with session classes by value (skeleton + state) and other session definitions by
        reference to their name, so each keeps its identity and restores in dependency order."""

        dispatch_table = _DISPATCH

        def __init__(self, file, agent, root, **kw):
            super().__init__(file, protocol=PROTOCOL, **kw)
            self._agent = agent
            self._root = root
            self.deps = set()
            self._strs = {}

        def save(self, obj, save_persistent_id=True):
            # Equal strings are written once whatever their identity: a restored class or function holds
            # copies where the original shared interned strings, and must still pickle to the same bytes.
            t = type(obj)
            if t is str or t is bytes:
                obj = self._strs.setdefault((t, obj), obj)
            elif t is tuple and obj and all(type(e) in _ATOMS for e in obj):
                key = tuple((type(e), e.hex() if type(e) is float else e) for e in obj)  # -0.0 != 0.0
                obj = self._strs.setdefault((t, key), obj)
            return super().save(obj, save_persistent_id)

        def persistent_id(self, obj):
            if obj is self._root:
                return None
            oid = id(obj)
            name = self._agent._defnames.get(oid)
            if name is not None:
                self.deps.add(name)
                return ("d", name)
            s = self._agent._sentinels.get(oid)
            if s is not None and s[2] is obj:
                return ("g", s[0], s[1])
            if isinstance(obj, types.ModuleType) and _import_ref(obj):
                return ("m", obj.__name__)
            return None

        def reducer_override(self, obj):
            if isinstance(obj, type) and obj.__module__ == "__main__":
                return _reduce_class(obj)
            reduce = _DISPATCH.get(type(obj))
            if reduce is not None and type(obj) not in copyreg.dispatch_table:
                return reduce(obj)
            return NotImplemented


def _persistent_load(ns):
    def load(pid):
        kind = pid[0]
        if kind == "d":
            try:
                return ns[pid[1]]
            except KeyError:
                raise _MissingDep(pid[1])
        if kind == "g":
            return getattr(importlib.import_module(pid[1]), pid[2])
        if kind == "m":
            return importlib.import_module(pid[1])
        raise pickle.UnpicklingError("unknown persistent id %r" % (pid,))

    return load


class _MissingDep(Exception):
    pass


class _Pickled:
    __slots__ = ("names", "kind", "fmt", "data", "buffers", "ids", "deps", "keep", "notes", "pre", "figs", "owners", "described",
                 "digest", "arrayless")

    def __init__(self, names, kind):
        self.names = tuple(names)
        self.kind = kind
        self.fmt = "p"
        self.data = b""
        self.buffers = []
        self.ids = frozenset()
        self.deps = ()
        self.keep = None  # memo copy held while groups are formed, so ids are not reused
        self.notes = ()  # what the reducers saved differently from the live object (_NOTES)
        self.pre = None  # sliced containers: [hash, len] of each buffer (its bytes empty when Go has it)
        self.figs = ()  # matplotlib figures in the pickle (figures.take)
        self.owners = None  # name -> "module:attribute" (owners.py), set by the snapshot
        self.described = None  # a reused state pickle's (group, pieces): snapshot._describe
        self.digest = None  # a small plain pickle's bytes, hashed (dump_digest compares with it)
        # A huge graph (over BIG_GRAPH) that held no array, tensor or figure: its restore need not
        # look through the unpickler's memo for them (restore._memo_objects). False: unknown or held.
        self.arrayless = False


def pickle_def(agent, names, obj, skipped):
    r = _Pickled(names, "def")
    if dill is None:
        for n in names:
            skipped[n] = {"name": n, "type": _typename(obj), "reason": "dill is not installed"}
        return None
    try:
        buf = io.BytesIO()
        bufs = []
        p = _DillPickler(buf, agent, obj, buffer_callback=_out_of_band(bufs))
        p.dump(obj)
        r.fmt, r.data, r.buffers, r.deps = "d", buf.getvalue(), bufs, tuple(sorted(p.deps - set(names)))
        if len(r.data) + sum(memoryview(b).nbytes for b in bufs) < SMALL_GROUP:  # re-checked: its digest
            r.digest = def_digest(agent, obj)
        return r
    except Exception as e:
        for n in names:
            skipped[n] = {"name": n, "type": _typename(obj), "reason": _reason(e)}
        return None

def pickle_one(agent, names, values):
    """Pickles values (one name: the value; several: a tuple) with the C pickler, else dill.
    Returns _Pickled or raises."""
    r = _Pickled(names, "data")
    s = (pickle_sliced(agent, names[0], values[0], holders.pickle_holder) if len(values) == 1
         else pickle_sliced_group(agent, names, values))
    if s is not None:
        r.data, r.buffers, r.pre, r.ids = s
        return r
    obj = values[0] if len(values) == 1 else tuple(values)
    if len(values) == 1 and type(obj) in (bytes, bytearray) and len(obj) >= BIG_BYTES:
        obj = _OOBBytes(obj)
    bufs = []
    before = None
    try:
        p, r.data, before = _c_dump(agent, obj, len(values) > 1, bufs, True)
        r.keep = p.memo.copy() if len(r.data) <= BIG_GRAPH else None
    except Exception as first:
        if dill is None:
            raise first
        bufs = []
        buf = io.BytesIO()
        del _SEEN[:], _NOTES[:]
        figures.begin()
        before = young_begin()
        p = _DillPickler(buf, agent, None, buffer_callback=_out_of_band(bufs))
        try:
            p.dump(obj)
        except Exception as e:
            raise e from first
        r.fmt = "d"
        r.data = buf.getvalue()
        r.keep = dict(p.memo) if len(r.data) <= BIG_GRAPH else None
        r.deps = tuple(sorted(p.deps))
    r.buffers = bufs
    r.pre = take_pre(bufs)
    r.figs = figures.take()
    ids = set()
    shared = agent._shared
    if r.keep is not None:
        del _SEEN[:]  # it may hold an array the dump made: let it die with the memo
        ids = _memo_ids(r, p, obj, shared, before)
    else:
        # A huge object graph: copying the pickler memo costs more than pickling. Sharing is then
        # detected through the values and their direct children only (b = d[5] still groups with d).
        for v in values:
            kids = v.values() if isinstance(v, dict) else v if isinstance(v, (list, set, tuple)) else ()
            ids.update(id(k) for k in kids if not isinstance(k, shared) and type(k) is not object)
        ids.update(id(o) for o in _SEEN)  # arrays and tensors anywhere in the graph
        r.arrayless = not _SEEN and not r.figs
    del _SEEN[:]
    r.notes = tuple(dict.fromkeys(_NOTES))
    del _NOTES[:]
    if len(values) > 1 or obj is values[0]:
        ids.update(id(v) for v in values if not isinstance(v, shared))
    r.ids = _with_nested(ids - carried_ids(), take_nested_ids())
    if r.fmt == "p" and not (r.pre or r.figs or r.notes):
        r.digest = _small_digest(r.data, r.buffers)
    return r


# A state item of plain data (a history entry, the libraries' settings): atoms, and tuples, lists
# and dicts of them, at most PLAIN_ITEMS values in all; history.Entry pickles as a plain tuple.
PLAIN_ITEMS = 4096
_PLAIN_SEQUENCES = (tuple, list, _Entry)


def pickle_plain(names, value):
    """value pickled by the plain C pickler when it is plain data (see PLAIN_ITEMS), else None. No
    reducer of the agent's applies to such a value, so the bytes are the ones pickle_one's pickler
    writes; what pickle_one works out besides (the ids the value shares by, from scans of the
    young objects: ~0.2 ms a turn for the turn's history entry) a state group never uses."""
    if not _is_plain(value, [PLAIN_ITEMS]):
        return None
    r = _Pickled(names, "state")
    r.data = pickle.dumps(value, protocol=PROTOCOL)
    return r


def _is_plain(v, left):
    left[0] -= 1
    if left[0] < 0:
        return False
    t = type(v)
    if t in _ATOMS:
        return True
    if t is dict:
        return all(_is_plain(k, left) and _is_plain(x, left) for k, x in v.items())
    if t in _PLAIN_SEQUENCES:
        return all(_is_plain(x, left) for x in v)
    return False


def _c_dump(agent, obj, multi, bufs, young):
    """obj pickled by the C pickler with the agent's reducers, its large buffers into bufs: (the
    pickler, the bytes, young_begin's answer taken just before the dump when young)."""
    buf = io.BytesIO()
    del _SEEN[:], _NOTES[:]
    begin_arrays(getattr(getattr(agent, "state", None), "known", frozenset()), multi)
    figures.begin()
    before = young_begin() if young else None  # every tracked object the dump makes is young after it (liveids)
    p = _DataPickler(buf, protocol=PROTOCOL, buffer_callback=_out_of_band(bufs))
    p.dump(obj)
    return p, buf.getvalue(), before


def _small_digest(data, bufs):
    """The hashes of a pickle and its buffers when all of it is under SMALL_GROUP, else None."""
    try:
        views = [b.raw() if isinstance(b, pickle.PickleBuffer) else memoryview(b) for b in bufs]
    except (BufferError, TypeError):
        return None
    if len(data) + sum(v.nbytes for v in views) >= SMALL_GROUP:
        return None
    return (_hash(data),) + tuple(_hash(v) for v in views)


def def_digest(agent, f):
    """What a session function is, for the re-check: its code object and the digest (dump_digest)
    of the rest dill saves of it (names, doc, defaults, attributes, annotations, closure values), or
    None for a class or when that rest needs more than the C pickler (a lambda in a closure). Equal
    to the one taken when its group was pickled, the function is unchanged: dill, which the group's
    re-pickle paid (~0.5 ms a function), need not run."""
    if type(f) is not types.FunctionType:
        return None
    try:
        cells = tuple(c.cell_contents for c in f.__closure__ or ())
    except ValueError:  # an empty cell
        return None
    d = dump_digest(agent, [(f.__name__, f.__qualname__, f.__module__, f.__doc__, f.__defaults__, f.__kwdefaults__,
                             f.__dict__, f.__annotations__, cells)])
    return None if d is None else (f.__code__,) + d


def dump_digest(agent, values):
    """The digest (_small_digest) of values pickled as pickle_one's C pickler pickles them, without
    what pickle_one works out besides (the ids the group shares by): a re-check of a small group
    whose digest is the one its saved bytes had has found it unchanged, for a sixth of the cost.
    None when the dump needs more than that (a figure, an object array's slices, a reducer's note,
    dill): the caller pickles it whole."""
    obj = values[0] if len(values) == 1 else tuple(values)
    bufs = []
    data = None
    try:
        _, data, _ = _c_dump(agent, obj, len(values) > 1, bufs, False)
    except Exception:
        pass
    finally:
        # What the dump left for pickle_one's caller, taken and dropped (each pickle resets it too).
        odd = [take_pre(bufs), take_nested_ids(), figures.take(), list(_NOTES)]
        del _SEEN[:], _NOTES[:]
    return None if data is None or any(odd) else _small_digest(data, bufs)


def _memo_ids(r, p, obj, shared, before):
    """The ids the pickled graph shares by: the memo's objects (sharing_ids), less the temporaries
    of __getstate__ and __reduce__ (liveids): freed after the snapshot, their reused addresses glued
    unrelated values. With before (young_begin's answer before the dump), the temporaries are the
    objects the dump made that die when the pickler's memo is released; else (None) the fixpoint
    (temporaries) counts the references each memo object has besides the C pickler's table, its
    copy and objs (dill's dict, whose copy shares the entries, and objs), and r.keep holds the memo
    while groups are formed, so ids are not reused."""
    objs = list(map(itemgetter(1), r.keep.values()))  # C-level: 100,000 entries for a figure
    types = list(map(type, objs))
    ids = sharing_ids(r.keep.keys(), objs, shared, obj, types)
    if before is None:
        return ids - temporaries(objs, 3 if r.fmt == "p" else 2)
    cands = young_ids(ids, before)  # the memo copy's tuples are young too, but never in ids
    leaves = untracked(objs, types, shared)
    del objs
    r.keep = None
    p.clear_memo()
    return ids - died(cands, leaves)


def _with_nested(ids, nested):
    """The group's ids, with those of the lists, dicts and sets inside sliced object arrays (JSON
    columns): a value elsewhere holding one of them joins the group (sliced.IdArray when any)."""
    if not nested:
        return frozenset(ids)
    np = sys.modules["numpy"]
    if len(nested) == 1:  # one sliced array (sorted already): the few other ids inserted
        return IdArray(np, nested[0]).replaced(np.zeros(0, np.int64), np.fromiter(ids, np.int64, count=len(ids)))
    # Stable (timsort): each nested array is sorted already, merged in O(n); quicksort sorted it again.
    return IdArray(np, np.sort(np.concatenate([np.fromiter(ids, np.int64, count=len(ids))] + nested), kind="stable"))


_PROBE_IDS = 10000


def _disjoint(a, b):
    """a and b share no id; asked of the larger set (a sliced container's IdArray answers itself)."""
    return a.isdisjoint(b) if len(a) >= len(b) else b.isdisjoint(a)


def _units(prev, names, cur):
    """name -> the names of its previous group, for groups of several names all candidates and none
    rebound: pickled together at once, as they will be saved. Pickled apart, then merged, a figure
    under three names (f, ax, fig) was pickled four times."""
    cand = set(names)
    out = {}
    for g in prev.groups.values():
        if g.kind == "data" and len(g.names) > 1 and all(
                m in cand and m in cur and prev.ids.get(m) == id(cur[m]) for m in g.names):
            out.update((m, tuple(g.names)) for m in g.names)
    return out


def _held_units(agent, names, cur, units):
    """name -> unit (its names, sorted) for candidates that another candidate's list, tuple, set or
    dict holds directly (``path.append(theta)``) and that no unit (_units) has yet: pickled together
    at once, as the merge below would save them. Pickled apart, the container was pickled twice,
    alone and then with what it holds (a list of 5,000 arrays: 50 ms more). Only containers the
    snapshot pickles whole are looked into (fewer than SLICE_MIN items: the scan is a small part of
    their pickling); values of shared types and the libraries' carried objects never glue groups."""
    shared = agent._shared
    by_id = {}
    for n in names:
        v = cur.get(n)
        if n in cur and n not in units and not isinstance(v, shared) and type(v) is not object:
            by_id[id(v)] = n
    if len(by_id) < 2:
        return {}
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    carried = None
    for n in by_id.values():
        v = cur[n]
        t = type(v)
        if t not in (list, tuple, dict, set, frozenset) or len(v) >= SLICE_MIN:
            continue
        for k in (v.values() if t is dict else v):
            m = by_id.get(id(k))
            if m is not None and m != n:
                carried = carried_ids() if carried is None else carried
                if id(k) not in carried:
                    parent[find(m)] = find(n)
    comps = {}
    for n in parent:
        comps.setdefault(find(n), []).append(n)
    return {n: tuple(sorted(c)) for c in comps.values() if len(c) > 1 for n in c}


def pickle_data(agent, names, cur, prev, p2g, skipped):
    """Pickles each candidate alone (or with the rest of its previous group, _units), merges names
    whose objects overlap (with each other or with groups not re-checked) and re-pickles merged
    groups together."""
    singles = {}
    todo = list(names)
    units = _units(prev, names, cur)
    units.update(_held_units(agent, names, cur, units))
    while todo:
        n = todo.pop()
        if n in singles or n in skipped:
            continue
        members = units.get(n, (n,))
        try:
            r = pickle_one(agent, list(members), [cur[m] for m in members])
        except Exception as e:
            if len(members) > 1:  # apart, as any candidates
                units.update((m, (m,)) for m in members)
                todo.extend(members)
                continue
            skipped[n] = {"name": n, "type": _typename(cur[n]), "reason": _reason(e)}
            continue
        for m in members:
            singles[m] = r
        ids = r.ids
        if not ids:
            continue
        # overlap with a group that was not a candidate: pull it in
        for g in prev.groups.values():
            if g.kind != "data" or not g.ids or all(m in singles or m in skipped or m in todo or m not in cur
                                                    for m in g.names):
                continue  # nothing it could pull in (a sliced container's own last group: a costly probe)
            if not _disjoint(g.ids, ids):
                for m in g.names:
                    if m in cur and m not in singles and m not in skipped and m not in todo:
                        todo.append(m)
    # union-find over shared ids
    parent = {n: n for n in singles}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    # Large id sets (a sliced container's million records) are probed, not inserted one by one.
    big = sorted(n for n in singles if len(singles[n].ids) > _PROBE_IDS)
    owner = {}
    for n in sorted(singles):
        if n in big:
            continue
        for i in singles[n].ids:
            o = owner.setdefault(i, n)
            if o != n:
                parent[find(n)] = find(o)
    for j, b in enumerate(big):
        for n in sorted(singles):
            if n != b and (n not in big or big.index(n) > j) and not _disjoint(singles[b].ids, singles[n].ids):
                parent[find(n)] = find(b)
    comps = {}
    for n in singles:
        comps.setdefault(find(n), []).append(n)
    out = []
    for members in comps.values():
        members.sort()
        if singles[members[0]].names == tuple(members):  # one name, or a unit that stayed as it was
            out.append(singles[members[0]])
            continue
        try:
            out.append(pickle_one(agent, members, [cur[m] for m in members]))
        except Exception:
            out.extend(singles[m] for m in members)  # together fails: save apart, lose aliasing
    return out
