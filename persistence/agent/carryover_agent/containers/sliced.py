"""Large containers of small objects, saved in slices (issues 13 and 25).

A list or dict of at least SLICE_MIN items, each an atom (int, float, str, bytes, bool, None) or a
JSON-like value (dicts, lists, tuples, sets and frozensets of them, nested: a *record* is a dict), is
pickled as one out-of-band buffer per slice of ~SLICE_BYTES, so a turn that changes one record, at
any depth, re-pickles and writes one slice, not the whole container. Anything else is pickled whole,
as before, and named in the checkpoint's timings ("unsliced"). What the records nest is checked and
fingerprinted by nested.py; small dicts holding such containers are holders.py's.

Finding the changed slices must cost far less than pickling (~1 s per million records). The agent
reads what it needs straight from memory with numpy gathers (~30 ms per million):
* the container's item pointers (a list's item array, a dict's entry table);
* each record's type and dict version tag, which CPython changes at every modification of a dict
  (PEP 509).

Why a slice found clean is unchanged (a false "clean" loses data):
* An item at the same address is the same object: the agent holds a reference to every item it saw
  (the shadow), so no item can be freed and another allocated at its address.
* Atoms are immutable. Any change to a record changes its version tag; a write below it changes a
  fingerprint (nested.py, which proves it).
* A record twice in the container makes it be pickled whole that turn (slices would restore two
  records). A record also bound to a name, or held by another saved value, shares the container's
  group ids (every record's id), so the grouping puts them in one group; a group of the container
  and names bound to its records (``for row in rows:`` leaves row bound) is still sliced, each such
  name saved as ``rows[key]``. Any other group holding the container is pickled whole.
A self-test checks these memory layouts on live objects on first use (written against CPython 3.11,
Debian's); if anything is unexpected, slicing is off and containers are pickled whole as before.

Costs: the shadow and the pointer arrays take ~40 bytes per item while a container is bound (~15%
of a million small dicts' own memory). The first checkpoint of a container walks it (nested.walk)
and pickles each slice as the walk passes it, compressed meanwhile on a worker thread: 0.6-0.9x one
pickle.dumps of a million nested records or of the api shape, ~1.4x of a DataFrame's JSON column
(whose own pickle is cheap for its size), on the 2-core test machine."""

import ctypes
import io
import operator
import pickle
import sys

from . import nested
from ..common import _ATOMS, PROTOCOL, _hash
from ..spool import compress_ahead

SLICE_MIN = 16384  # containers with fewer items are pickled whole
SLICE_BYTES = 64 << 10  # target pickled size of a slice
_SAMPLE = 512  # items pickled to size the slices of a new container
STATS = {"sliced_bytes": 0, "sliced_repickled_bytes": 0, "unsliced": []}  # this snapshot's (containers, object arrays)
SLICE_MAX = 16 << 20  # a slice pickling larger than this (huge records): the container is pickled whole


def _rebuild_sliced(kind, k, parts):
    """The container back from its slices' pickles (``k``, the items per slice, is for the agent)."""
    out = [] if kind == "list" else {}
    add = out.extend if kind == "list" else out.update
    for p in parts:
        add(pickle.loads(p))
    _REBUILT[id(out)] = (out, k)
    return out


_REBUILT = {}  # id -> (container, k) rebuilt by the restore under way (seed() takes them)


def seed(agent, name, obj, desc, holder=None):
    """After a restore: the cache of a container rebuilt from slices, from the slices' chunks in its
    descriptor, so the next snapshot re-pickles only the slices a turn changes. Returns the ids the
    restored group shares by, or None when obj is not such a container (nor a small dict holding
    such containers: holder, holders.seed_holder, which the caller passes, as holders builds on
    this module)."""
    hit = _REBUILT.get(id(obj))
    if hit is None or hit[0] is not obj:
        if holder is not None and type(obj) is dict and len(obj) < SLICE_MIN:
            return holder(agent, name, obj, desc)
        return None
    slices = [b[2][0] for b in desc["b"] if len(b[2]) == 1]
    c = seed_one(agent, name, obj, slices)
    return None if c is None else c.ids


def seed_one(agent, key, obj, slices):
    """The cache of container obj (rebuilt from slices, their [hash, len] in slices) under key, or None."""
    hit = _REBUILT.pop(id(obj), None)
    m = _memory()
    if hit is None or hit[0] is not obj or m is None:
        return None
    try:
        c = _scan(m, obj, None)
        c.fp = nested.walk(m, c.vals, c.vptrs, m.np.arange(len(c.vals), dtype=m.np.int64), top_dicts=False)
    except (_Unsliceable, nested.Irregular):
        return None
    c.k = hit[1]
    c.slices = slices
    if len(c.slices) != max(1, -(-len(c.vals) // c.k)):
        return None
    c.ids = _ids(c, None, None, None, None)
    agent._sliced[key] = c
    return c


def forget_rebuilt():
    _REBUILT.clear()


class _Parts:
    """Pickles as a call to _rebuild_sliced with one out-of-band buffer per slice."""

    __slots__ = ("kind", "k", "bufs")

    def __init__(self, kind, k, bufs):
        self.kind, self.k, self.bufs = kind, k, bufs

    def __reduce_ex__(self, proto):
        return (_rebuild_sliced, (self.kind, self.k, tuple(self.bufs)))


class _Whole:
    """The process's memory as one read-only array of 8-byte words, starting at address 8 (numpy
    treats address 0 as "no buffer"). Indexing it reads memory: only addresses of live objects the
    agent holds are ever read."""

    __array_interface__ = {"data": (8, True), "shape": (1 << 44,), "typestr": "<i8", "version": 3}


class _Memory:
    """Word reads and gathers over the process's memory, and the CPython struct offsets they use."""

    DICT_TAG, DICT_KEYS, DICT_VALUES, LIST_ITEMS = 3, 4, 5, 3  # word offsets in PyDictObject/PyListObject
    SET_MASK, SET_TABLE = 4, 5  # word offsets in PySetObject

    def __init__(self, np):
        self.np = np
        self.mem = np.asarray(_Whole())
        self.tables = False  # dict entry tables readable (else the pointers come from map(id, ...))

    def word(self, addr, off=0):
        return int(self.mem[(addr >> 3) - 1 + off])

    def gather(self, ptrs, off):
        """Word off of each object at ptrs (take: faster than indexing with a temporary array)."""
        return self.mem.take((ptrs >> 3) + (off - 1))

    def list_ptrs(self, lst):
        base = (self.word(id(lst), self.LIST_ITEMS) >> 3) - 1
        return self.mem[base:base + len(lst)].copy()

    def dict_ptrs(self, d):
        """(key pointers, value pointers) in iteration order."""
        if self.tables and self.word(id(d), self.DICT_VALUES) == 0:
            got = self._table(d)
            if got is not None:
                return got
        np = self.np
        return (np.fromiter(map(id, d), np.int64, count=len(d)),
                np.fromiter(map(id, d.values()), np.int64, count=len(d)))

    def _table(self, d):
        """A combined table's entries (CPython 3.11+): a header, the index array, then entries of
        (hash, key, value) or (key, value) words; a deleted entry has a NULL value."""
        keys = self.word(id(d), self.DICT_KEYS)
        head = ctypes.string_at(keys, 32)
        nent = int.from_bytes(head[24:32], "little")
        stride = 3 if head[10] == 0 else 2
        start = ((keys + 32 + (1 << head[9])) >> 3) - 1
        words = self.mem[start:start + nent * stride].reshape(nent, stride)
        live = words[:, stride - 1] != 0
        k, v = words[live, stride - 2], words[live, stride - 1]
        return (k, v) if len(v) == len(d) else None


_MEM = [None, False]  # the _Memory once the self-test passed; whether it ran


def _memory():
    if _MEM[1]:
        return _MEM[0]
    _MEM[1] = True
    try:
        import numpy as np

        m = _Memory(np)
        if _selftest(m) and nested.selftest(m):
            m.tables = _tables_ok(m)
            _MEM[0] = m
    except Exception:
        pass
    return _MEM[0]


def _selftest(m):
    """The layouts slicing relies on, checked on live objects: reference count, type, dict version
    tag changed by each kind of modification, list item array."""
    if sys.implementation.name != "cpython" or getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        return False
    d = {"a": 1}
    if m.word(id(d)) != sys.getrefcount(d) - 1 or m.word(id(d), 1) != id(dict):
        return False
    tags = [m.word(id(d), m.DICT_TAG)]
    for op in (lambda: d.__setitem__("a", 2), lambda: d.__setitem__("b", 3), lambda: d.pop("b"),
               lambda: d.update(c=4), lambda: d.setdefault("e", 5), lambda: d.popitem(), lambda: d.clear()):
        op()
        tags.append(m.word(id(d), m.DICT_TAG))
    lst = [d, 7]
    items = m.word(id(lst), m.LIST_ITEMS)
    return len(set(tags)) == len(tags) and m.word(items) == id(d) and m.word(items, 1) == id(7)


class _Split:
    def __init__(self):
        self.a, self.b = 1, 2


def _tables_ok(m):
    """Dict entry tables read as _table and nested._table read them, on live dicts: the entries, and
    the kind byte that tells a split table (an instance's __dict__) from the two entry layouts."""
    np = m.np
    samples = [{i * 7: str(i) for i in range(50)}, {"k%d" % i: i for i in range(50)}]
    del samples[0][14], samples[1]["k3"]
    split = vars(_Split())
    kinds = [(m.word(m.word(id(d), m.DICT_KEYS), 1) >> 16) & 0xFF for d in samples + [split]]
    if kinds != [0, 1, 2] or m.word(id(split), m.DICT_VALUES) == 0 or m.word(id(samples[1]), m.DICT_VALUES) != 0:
        return False
    for d in samples:
        got = m._table(d)
        want = (np.fromiter(map(id, d), np.int64), np.fromiter(map(id, d.values()), np.int64))
        if got is None or not (np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])):
            return False
    return True


class _Cache:
    """What the last snapshot of one container saw: the container, the shadow (its items, held so
    their addresses stay theirs), pointers and record version tags by position, the fingerprints of
    what the items nest (nested.py), the slices' chunk lists and the ids the group shares by."""

    __slots__ = ("obj", "kind", "k", "ver", "keys", "vals", "kptrs", "vptrs", "rec", "tags", "fp", "slices", "ids",
                 "parts", "pre")


class _Unsliceable(Exception):
    """The container holds something not JSON-like: pickled whole while bound; args[0] says why."""


class _Aliased(Exception):
    """A record or nested container is twice in the container: pickled whole this turn, so it
    stays one object."""


def purge(agent, cur):
    """Drops the caches (and their shadows) of names gone or rebound. A container inside a small
    dict (holders.py) is keyed (name, key, ...): dropped when that path no longer leads to it."""
    for key in [k for k, c in agent._sliced.items() if resolve(cur, k) is not c.obj]:
        del agent._sliced[key]
    for key in [k for k, (v, _) in agent._unsliced.items() if resolve(cur, k) is not v]:
        del agent._unsliced[key]


def resolve(cur, key):
    """The value a cache key names in the namespace cur, or None."""
    if type(key) is str:
        return cur.get(key)
    v = cur.get(key[0])
    for k in key[1:]:
        if type(v) is not dict:
            return None
        v = v.get(k)
    return v


def _sliceable(agent, key, v):
    """v is large enough to slice and not known irregular. A known irregular container is named in
    this snapshot's figures again (it is pickled whole)."""
    if type(v) not in (list, dict) or len(v) < SLICE_MIN:
        return False
    hit = agent._unsliced.get(key)
    if hit is not None and hit[0] is v:
        _report(key, v, hit[1])
        return False
    return True


def _report(key, v, reason):
    name = key if type(key) is str else key[0] + "".join("[%r]" % k for k in key[1:])
    if any(u["name"] == name for u in STATS["unsliced"]):
        return  # pickled alone, then again in its group: named once
    STATS["unsliced"].append({"name": name, "type": type(v).__name__, "reason": "pickled whole: " + reason})


def pickle_sliced(agent, name, v, holder=None):
    """(in-band pickle, buffers, [[hash, len]] per buffer, ids) of container v bound to name, or None
    when v is to be pickled whole. A clean slice whose chunk Go may not have (not referenced by the
    committed state) is pickled again. A small dict holding large containers (``api['items']``) has
    them sliced by holder (holders.pickle_holder, which the caller passes: holders builds on this
    module)."""
    if not _sliceable(agent, name, v):
        if holder is not None and type(v) is dict and len(v) < SLICE_MIN:
            return holder(agent, name, v)
        return None
    c = _slice(agent, name, v)
    return None if c is None else _in_band(c, c.parts)


def pickle_sliced_group(agent, names, values):
    """A group of one large container and names bound to records in it, or to containers nested in
    them (``for row in rows:`` leaves row bound to the last record; ``tags = rows[3]['tags']``): the
    container in slices, each such name pickled as ``container[key]...``, so ``row is rows[-1]``
    survives a restore. None for any other group."""
    big = [i for i, (n, v) in enumerate(zip(names, values)) if _sliceable(agent, n, v)]
    if len(big) != 1 or not all(type(v) in (dict, list, set) for i, v in enumerate(values) if i != big[0]):
        return None
    c = _slice(agent, names[big[0]], values[big[0]])
    if c is None:
        return None
    paths = _paths(c, [v for i, v in enumerate(values) if i != big[0]])
    if paths is None:
        return None
    it = iter(paths)
    items = tuple(c.parts if i == big[0] else _path_item(c.parts, next(it)) for i in range(len(values)))
    return _in_band(c, items)


def _slice(agent, name, v):
    """Brings v's cache up to date and pickles its changed slices (c.parts). None when v is to be
    pickled whole."""
    m = _memory()
    if m is None:
        return None
    old = agent._sliced.pop(name, None)
    if old is not None and old.obj is not v:
        old = None
    dirty = None
    try:
        c = _scan(m, v, old)
        dirty, changed = _dirty(m.np, c, old)
        gone, added = _nested(m, c, old, dirty)
        c.ids = _ids(c, old, changed, gone, added)
        if c.k is None:
            c.k = slice_len(c.vals, c.keys)
        if old is not None:
            old.keys = old.vals = None  # the new shadow holds the items
        if c.ids.duplicated() and not _dups_in_one_slice(c):
            raise _Aliased()
        _pickle(c, dirty, old, agent.state.known)
    except _Unsliceable as e:
        agent._unsliced[name] = (v, e.args[0])
        _report(name, v, e.args[0])
        return None
    except _Aliased:
        c.pre = None
        _report(name, v, "an object is in it twice (slices would restore two)")
        if dirty is not None:  # keep what is known: the slices changed since are pickled next time
            c.slices = [None if i in dirty else cl for i, cl in enumerate(old.slices)]
            c.ids = None
            agent._sliced[name] = c
        return None
    agent._sliced[name] = c
    return c


def _dups_in_one_slice(c):
    """Every object that is twice in the container is so within one slice (one pickle: its memo keeps
    it one object). False for more than a few such objects."""
    np = sys.modules["numpy"]
    a = c.ids.a
    dup = np.unique(a[1:][a[1:] == a[:-1]])
    if len(dup) > 64 or id(c.obj) in dup.tolist():
        return False
    for i in dup.tolist():
        owners = [(c.vptrs == np.int64(i)).nonzero()[0]]
        owners += [o[p == np.int64(i)] for p, o in ((c.fp.dptr, c.fp.down), (c.fp.lptr, c.fp.lown), (c.fp.sptr, c.fp.sown))]
        if len(set((np.concatenate(owners) // c.k).tolist())) != 1:
            return False
    return True


def _paths(c, objs):
    """The path (keys from the container down) of each object, or None when one is not a record of
    the container or a container nested in one."""
    np = c.vptrs.dtype.type  # numpy's int64: compare as numbers
    out = []
    for o in objs:
        at = (c.vptrs == np(id(o))).nonzero()[0]
        if len(at) == 1:
            out.append((int(at[0]) if c.kind == "list" else c.keys[int(at[0])],))
            continue
        own = c.fp.owner_of(sys.modules["numpy"], id(o)) if c.fp is not None else None
        if own is None:
            return None
        sub = _find(c.vals[own], o, nested.MAX_DEPTH)
        if sub is None:
            return None
        out.append((own if c.kind == "list" else c.keys[own],) + sub)
    return out


def _find(v, o, depth):
    """The keys from v down to the object o (by identity), or None."""
    if depth < 0:
        return None
    t = type(v)
    kids = v.items() if t is dict else enumerate(v) if t in (list, tuple) else ()
    for k, x in kids:
        if x is o:
            return (k,)
        if type(x) in (dict, list, tuple):
            sub = _find(x, o, depth - 1)
            if sub is not None:
                return (k,) + sub
    return None


def _path_item(parts, path):
    obj = parts
    for k in path:
        obj = _Item(obj, k)
    return obj


class _Item:
    """Pickles as ``container[key]`` over the container's own _Parts (memoised: the same object)."""

    __slots__ = ("parts", "key")

    def __init__(self, parts, key):
        self.parts, self.key = parts, key

    def __reduce_ex__(self, proto):
        return (operator.getitem, (self.parts, self.key))


def _in_band(c, obj):
    """(in-band pickle of obj, buffers, [[hash, len]] per buffer, ids); counts the figures."""
    buf, bufs = io.BytesIO(), []
    pickle.Pickler(buf, protocol=PROTOCOL, buffer_callback=bufs.append).dump(obj)
    c.parts = None
    _count(c, bufs)
    return buf.getvalue(), bufs, list(c.slices), c.ids


def _scan(m, v, old):
    """The container's items as of now: shadow, pointers, which are records, their version tags."""
    np = m.np
    c = _Cache()
    c.obj, c.kind, c.k, c.slices, c.fp, c.ids, c.pre = v, "list" if type(v) is list else "dict", None, None, None, None, None
    if old is not None:
        c.k = old.k
    same = _scan_dict(m, c, old) if c.kind == "dict" else _scan_list(m, c, old)
    if same:
        c.rec = old.rec
    else:
        ty = m.gather(c.vptrs, 1)
        c.rec = ty == id(dict)
        ok = np.isin(ty, _item_ids(np))
        if not ok.all():
            raise _Unsliceable("holds a %s" % type(c.vals[int(np.flatnonzero(~ok)[0])]).__name__)
    c.tags = np.zeros(len(c.vptrs), np.int64)
    c.tags[c.rec] = m.gather(c.vptrs[c.rec], m.DICT_TAG)
    return c


def _scan_dict(m, c, old):
    """Keys and values of a dict container; True when it is unchanged since old (same version tag).
    The shadow is taken before the pointers are read, so it holds the objects they point to."""
    c.ver = m.word(id(c.obj), m.DICT_TAG)
    if old is not None and old.ver == c.ver:
        c.keys, c.vals, c.kptrs, c.vptrs = old.keys, old.vals, old.kptrs, old.vptrs
        return True
    c.keys, c.vals = list(c.obj), list(c.obj.values())
    c.kptrs, c.vptrs = m.dict_ptrs(c.obj)
    if not m.np.isin(m.gather(c.kptrs, 1), _atom_ids(m.np)).all():
        raise _Unsliceable("a key is not an atom")
    return False


def _scan_list(m, c, old):
    """Items of a list container; True when they are the same objects as old's (old's shadow kept)."""
    c.ver = c.keys = c.kptrs = None
    if old is not None:
        ptrs = m.list_ptrs(c.obj)
        if m.np.array_equal(ptrs, old.vptrs):  # the same objects, which old's shadow holds: no copy
            c.vals, c.vptrs = old.vals, ptrs
            return True
    c.vals = list(c.obj)
    c.vptrs = m.list_ptrs(c.vals)  # the shadow's own pointers: it holds what they point to
    if not c.vptrs.all():
        raise _Unsliceable("a NULL item")  # never for a list Python code can see; the reads below would fault
    return False


def _atom_ids(np):
    return np.array([id(t) for t in _ATOMS], np.int64)


def _item_ids(np):
    """Types an item may have: atoms, and the containers of JSON-like values (what they hold is
    checked by nested.walk whenever their slice is pickled; tuples and frozensets cannot change after
    that, and the fingerprints see every change of the others)."""
    return np.array([id(t) for t in _ATOMS] + [id(t) for t in (dict, list, tuple, set, frozenset)], np.int64)


def _dirty(np, c, old):
    """(indexes of the slices whose items or records changed since the last snapshot, positions
    whose item is another object); (None, None) when everything is new. With the test-only switch
    (nested.NO_DETECTION_ENV) nothing is found changed."""
    if old is None or c.k is None:
        return None, None
    if nested.detection_off():
        return set(), np.zeros(0, np.int64)
    n, n0 = len(c.vptrs), len(old.vptrs)
    m = min(n, n0)
    moved = c.vptrs[:m] != old.vptrs[:m]
    if c.kptrs is not None and c.kptrs is not old.kptrs:
        moved |= c.kptrs[:m] != old.kptrs[:m]
    changed = np.concatenate([np.flatnonzero(moved), np.arange(m, max(n, n0))])
    edited = np.flatnonzero(c.tags[:m] != old.tags[:m])
    dirty = set((np.concatenate([changed, edited]) // c.k).tolist())
    return {i for i in dirty if i * c.k < n}, changed


REWALK = 2  # the fingerprints are walked anew once what they keep alive is this many times a full walk


def _nested(m, c, old, dirty):
    """Brings the fingerprints of what the items nest up to date (c.fp), adding to dirty the slices
    whose nested containers changed. Returns (pointers of mutable containers dropped, added), or
    (None, None) when the fingerprints were walked anew (the ids are then rebuilt)."""
    np = m.np
    n = len(c.vals)
    try:
        if dirty is None or old.fp is None:
            after = None
            if dirty is None and _early_k(c):
                after, c.pre = early(c.k, n, lambda i: _pickle_slice(c, i))
            c.fp = nested.walk(m, c.vals, c.vptrs, np.arange(n, dtype=np.int64), top_dicts=False, after=after)
            return None, None
        hit = nested.changed(m, old.fp)
        dirty.update(i for i in set((hit // c.k).tolist()) if i * c.k < n)
        if old.fp.nkeep > REWALK * max(old.fp.nobj, 1) or len(dirty) * c.k * 2 > n:
            c.fp = nested.walk(m, c.vals, c.vptrs, np.arange(n, dtype=np.int64), top_dicts=False)
            return None, None
        if not dirty:
            c.fp = old.fp
            return (), ()
        pos = np.concatenate([np.arange(i * c.k, min(n, (i + 1) * c.k), dtype=np.int64) for i in sorted(dirty)])
        fresh = nested.walk(m, list(map(c.vals.__getitem__, pos.tolist())), c.vptrs[pos], pos, top_dicts=False)
        drop = np.zeros(n, bool)
        drop[pos] = True
        c.fp, gone, added = nested.merge(np, old.fp, fresh, drop)
        return gone, added
    except nested.Irregular as e:
        raise _Unsliceable(e.args[0])


class IdArray:
    """The ids a sliced container's group shares by (the container and its records) as a sorted
    int64 array: a set of a million Python ints costs ~100 ms to build and ~50 ms to free. Answers
    what the grouping asks of an id set: len, iteration, isdisjoint."""

    __slots__ = ("a", "np")

    def __init__(self, np, a):
        self.np, self.a = np, a

    def __len__(self):
        return len(self.a)

    def __iter__(self):
        return iter(self.a.tolist())

    def isdisjoint(self, other):
        if other is self:  # the group's own previous ids, unchanged: what set.isdisjoint shortcuts too
            return not len(self.a)
        np = self.np
        o = other.a if isinstance(other, IdArray) else np.fromiter(other, np.int64, count=len(other))
        i = np.searchsorted(self.a, o)
        i[i == len(self.a)] = 0
        return not len(self.a) or not (self.a[i] == o).any()

    def duplicated(self):
        """An id is there twice: a record twice in the container (its slices would unpickle two)."""
        return bool(len(self.a) > 1 and (self.a[1:] == self.a[:-1]).any())

    def replaced(self, gone, new):
        """A copy without the ids gone and with the ids new (O(n) copies, no Python objects)."""
        np = self.np
        a = self.a
        if len(gone):
            keep = np.ones(len(a), bool)
            keep[np.searchsorted(a, np.sort(gone))] = False
            a = a[keep]
        if not len(new):
            return IdArray(np, a)
        new = np.sort(new)
        at = np.searchsorted(a, new)
        if len(new) > 1024:
            return IdArray(np, np.insert(a, at, new))
        out = np.empty(len(a) + len(new), a.dtype)  # one copy in runs (np.insert sorts its indexes)
        prev = 0
        for j, (i, v) in enumerate(zip(at.tolist(), new.tolist())):
            out[prev + j:i + j] = a[prev:i]
            out[i + j] = v
            prev = i
        out[prev + len(new):] = a[prev:]
        return IdArray(np, out)


def _ids(c, old, changed, gone, added):
    """The ids the group shares by (the container, its records, the mutable containers they nest),
    updated in time proportional to what was replaced; rebuilt when the fingerprints were walked anew."""
    np = sys.modules["numpy"]
    if changed is None or gone is None or old.ids is None:
        # Stable (timsort): the pointers come in long ascending runs (allocation order), merged in O(n).
        return IdArray(np, np.sort(np.concatenate([c.vptrs[c.rec], c.fp.mutable_ptrs(np),
                                                   np.array([id(c.obj)], np.int64)]), kind="stable"))
    if not len(changed) and not len(gone) and not len(added):
        return old.ids
    was, now = changed[changed < len(old.vptrs)], changed[changed < len(c.vptrs)]
    gone, added = np.asarray(gone, np.int64), np.asarray(added, np.int64)
    if len(gone) and len(added):  # a dirty slice's containers walked again: mostly the same ones
        both = np.intersect1d(gone, added)
        gone, added = gone[~np.isin(gone, both)], added[~np.isin(added, both)]
    return old.ids.replaced(np.concatenate([old.vptrs[was][old.rec[was]], np.asarray(gone, np.int64)]),
                            np.concatenate([c.vptrs[now][c.rec[now]], np.asarray(added, np.int64)]))


def _pickle(c, dirty, old, known):
    n = len(c.vals)
    if c.k is None:
        c.k = slice_len(c.vals, c.keys)
    nsl = max(1, -(-n // c.k))
    prev = old.slices if old is not None and old.k == c.k else []
    c.slices, datas = [], []
    for i in range(nsl):
        cl = prev[i] if dirty is not None and i not in dirty and i < len(prev) else None
        if cl and cl[0] in known:
            data = None
        else:
            data = c.pre.pop(i, None) if c.pre else None
            if data is None:
                data = _pickle_slice(c, i)
            cl = [_hash(data), len(data)]
        c.slices.append(cl)
        datas.append(data)
    c.pre = None
    c.parts = _Parts(c.kind, c.k, [pickle.PickleBuffer(d if d is not None else b"") for d in datas])


def early(k, n, pickle_slice):
    """(after, pre): a walk's after() that pickles each slice [i * k, (i + 1) * k) of n items as soon
    as the walk has passed it, into pre (index -> pickle), and has it compressed meanwhile
    (spool.compress_ahead). Its objects are then still in the CPU cache: a first save of 200,000
    records took ~15% less than walking all, then pickling all."""
    pre = {}

    def after(end):
        i = len(pre)
        while i * k < n and min((i + 1) * k, n) <= end:
            pre[i] = data = pickle_slice(i)
            compress_ahead(_hash(data), data)
            i += 1
    return after, pre


def _early_k(c):
    """Sets c.k before a first walk, for early(); False when the sample cannot be pickled (the walk
    will say why the container is not sliced)."""
    if c.k is None:
        try:
            c.k = slice_len(c.vals, c.keys)
        except Exception:
            return False
    return True


def _count(c, bufs):
    """Adds this container to the snapshot's figures: its pickled size, and what was pickled anew."""
    STATS["sliced_bytes"] += sum(n for _, n in c.slices)
    STATS["sliced_repickled_bytes"] += sum(len(b.raw()) for b in bufs)


def reset_stats():
    STATS["sliced_bytes"] = STATS["sliced_repickled_bytes"] = 0
    STATS["unsliced"] = []


def timings():
    """This snapshot's figures for the checkpoint's timings (nothing when no container was large)."""
    out = {k: STATS[k] for k in ("sliced_bytes", "sliced_repickled_bytes") if STATS["sliced_bytes"]}
    if STATS["unsliced"]:
        out["unsliced"] = list(STATS["unsliced"])
    return out


def slice_len(vals, keys=None):
    """Items per slice: ~SLICE_BYTES of pickle, from a sample spread over the items (later items are
    often larger: str(i) grows with i)."""
    step = max(1, len(vals) // _SAMPLE)
    sample = vals[::step] if keys is None else dict(zip(keys[::step], vals[::step]))
    per = max(1, len(pickle.dumps(sample, PROTOCOL)) // max(1, len(sample)))
    return max(64, min(1 << 16, SLICE_BYTES // per))


def _pickle_slice(c, i):
    """One slice's pickle (its items were checked JSON-like by nested.walk when they last changed)."""
    a, b = i * c.k, min(len(c.vals), (i + 1) * c.k)
    vals = c.vals[a:b]
    part = vals if c.kind == "list" else dict(zip(c.keys[a:b], vals))
    data = pickle.dumps(part, PROTOCOL)
    if len(data) > SLICE_MAX:
        raise _Unsliceable("a slice of it pickles to more than %d MiB" % (SLICE_MAX >> 20))
    return data
