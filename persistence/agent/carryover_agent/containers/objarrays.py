"""numpy object arrays of atoms and JSON-like values (a DataFrame's string and JSON columns) pickled
in slices (issues 13 and 25).

numpy pickles an object array item by item, in-band: a DataFrame with a million-row string column
costs ~300 ms at every turn that touches the frame, even one that changes a float. An object array of
at least SLICE_MIN atoms (str, int, float, bytes, bool, None) or JSON-like values (lists, dicts,
tuples and sets of them, nested.py), C-contiguous and owning its memory,
is reduced instead to ``_object_array(shape, k, slices, parts)``: one out-of-band buffer per slice of
k items, so only the slices whose items changed are pickled again.

Changes are found as for sliced containers (sliced.py): the array's memory is its item pointers, read
with numpy; the agent holds the previous items (the shadow) so an address cannot be reused unseen,
and atoms are immutable, so the same pointer means the same value; a nested value's writes are
found by its fingerprints (nested.py). A list, dict or set held by a JSON column and bound to
another name too makes the frame's group hold both (the column's nested containers are among its
ids, NESTED_IDS); such a group pickles the array whole, so the two stay one object.

Reducers have no agent: pickle_one sets what they need (the chunks Go has) in ``CTX`` and reads the
buffers they made from ``take_pre``. Entries are keyed by the array's id and hold the array; one whose
array nobody else holds any more is dropped at the next snapshot (purge)."""

import pickle
import sys

from ..common import PROTOCOL, _hash
from . import nested
from .sliced import REWALK, SLICE_MIN, STATS, IdArray, _memory, early, slice_len

_ENTRIES = {}  # id(array) -> _Entry
_PRE = {}  # id(PickleBuffer) -> (PickleBuffer, [hash, len]) made by the pickle under way
CTX = {"known": frozenset(), "group": False}  # the committed state's chunks; several values pickled together
NESTED_IDS = []  # the pickle under way's sliced arrays' nested lists, dicts and sets (IdArrays)


class _Entry:
    __slots__ = ("arr", "shadow", "ptrs", "k", "slices", "fp", "ids", "pre")


def _object_array(shape, k, slices, parts):
    """The array back from its slices; its entry is seeded so the next snapshot pickles only what changes."""
    np = sys.modules.get("numpy") or __import__("numpy")
    items = []
    for p in parts:
        items.extend(pickle.loads(p))
    arr = np.empty(shape, dtype=object)
    arr.reshape(-1)[:] = items
    m = _memory()
    if m is not None and len(slices) == len(parts):
        e = _Entry()
        e.arr, e.shadow, e.k, e.slices = arr, items, k, [list(s) for s in slices]
        e.ptrs = _ptrs(m, arr)
        try:
            e.fp = nested.walk(m, items, e.ptrs, m.np.arange(len(items), dtype=m.np.int64))
        except nested.Irregular:
            return arr
        e.ids = _nested_ids(m.np, e.fp)
        _ENTRIES[id(arr)] = e
    return arr


def purge():
    """Drops the entries of arrays only the agent still holds."""
    for key in [key for key, e in _ENTRIES.items() if sys.getrefcount(e.arr) <= 2]:
        del _ENTRIES[key]


def begin(known, group=False):
    """Before a pickle: the chunks Go has (a clean slice not among them is pickled again), and
    whether several values are pickled together (an array holding lists, dicts or sets is then
    pickled whole: another value of the group may hold one of them)."""
    CTX["known"], CTX["group"] = known, group
    _PRE.clear()
    del NESTED_IDS[:]


def take_nested_ids():
    """The ids of the nested containers of the arrays sliced by the pickle under way (int64 arrays)."""
    out = [i.a for i in NESTED_IDS if len(i)]
    del NESTED_IDS[:]
    return out


def is_pre(b):
    """Whether buffer b is one this module made and hashed (it must stay out of band)."""
    return id(b) in _PRE


def take_pre(bufs):
    """[hash, len] of each buffer this module made (None for the others), and forgets them."""
    pre = [(_PRE.get(id(b)) or (None, None))[1] for b in bufs]
    _PRE.clear()
    return pre if any(p is not None for p in pre) else None


def reduce_object_array(a):
    """The sliced reduce of object array a, or None when numpy's own reduce is to be used."""
    np = sys.modules["numpy"]
    if type(a) is not np.ndarray or a.dtype != object or a.size < SLICE_MIN or a.base is not None \
            or not a.flags.c_contiguous:
        return None
    m = _memory()
    if m is None:
        return None
    e = _ENTRIES.get(id(a))
    if e is not None and e.arr is not a:
        e = None
    new = _scan(m, np, a, e)
    if new is None or (CTX["group"] and len(new[0].ids)):
        _ENTRIES.pop(id(a), None)
        return None
    _ENTRIES[id(a)] = new[0]
    NESTED_IDS.append(new[0].ids)
    return (_object_array, _args(new[0], new[1], a.shape))


def _ptrs(m, a):
    start = (a.__array_interface__["data"][0] >> 3) - 1
    return m.mem[start:start + a.size].copy()


def _scan(m, np, a, e):
    """(the array's new entry, indexes of dirty slices or None for all), or None when an item is not
    JSON-like, or a list, dict or set is in it twice (slices would restore two). The old shadow stays
    alive until the pointers are compared; nested values are checked by their fingerprints (nested.py)."""
    ptrs = _ptrs(m, a)
    if not ptrs.all():
        return None  # a NULL item (an array a C extension left uninitialised): nothing to read there
    n = len(ptrs)
    new = _Entry()
    new.arr, new.ptrs, new.pre = a, ptrs, None
    try:
        if e is not None and len(e.ptrs) == n and e.fp is not None:
            new.k, new.slices = e.k, e.slices
            if nested.detection_off():
                new.shadow, new.fp, new.ids = e.shadow, e.fp, e.ids
                return new, set()
            changed = np.flatnonzero(ptrs != e.ptrs)
            hit = nested.changed(m, e.fp)
            new.shadow = e.shadow if not len(changed) else a.reshape(-1).tolist()
            dirty = set((np.concatenate([changed, hit]) // e.k).tolist())
            if not dirty:
                new.fp, new.ids = e.fp, e.ids
                return new, dirty
            if e.fp.nkeep > REWALK * max(e.fp.nobj, 1) or len(dirty) * e.k * 2 > n:
                new.fp = nested.walk(m, new.shadow, ptrs, np.arange(n, dtype=np.int64))
                new.ids = _nested_ids(np, new.fp)
                return None if new.ids.duplicated() else (new, dirty)
            pos = np.concatenate([np.arange(i * e.k, min(n, (i + 1) * e.k), dtype=np.int64) for i in sorted(dirty)])
            fresh = nested.walk(m, list(map(new.shadow.__getitem__, pos.tolist())), ptrs[pos], pos)
            drop = np.zeros(n, bool)
            drop[pos] = True
            new.fp, gone, added = nested.merge(np, e.fp, fresh, drop)
            new.ids = e.ids.replaced(gone, added) if len(gone) or len(added) else e.ids
        else:
            new.shadow = a.reshape(-1).tolist()
            new.k, new.slices, dirty = _first_k(new.shadow), None, None
            after = None
            if new.k is not None:
                after, new.pre = early(new.k, n, lambda i: _pickle_slice(new, i))
            new.fp = nested.walk(m, new.shadow, ptrs, np.arange(n, dtype=np.int64), after=after)
            new.ids = _nested_ids(np, new.fp)
    except nested.Irregular:
        return None
    if new.ids.duplicated():
        return None
    return new, dirty


def _first_k(shadow):
    """Items per slice, known before the first walk so it can pickle slices as it goes (early); None
    when the sample cannot be pickled (the walk will say why the array is not sliced)."""
    try:
        return slice_len(shadow)
    except Exception:
        return None


def _pickle_slice(e, i):
    return pickle.dumps(e.shadow[i * e.k:(i + 1) * e.k], PROTOCOL)


def _nested_ids(np, fp):
    """Stable (timsort): the pointers come in long ascending runs (allocation order), merged in O(n)."""
    return IdArray(np, np.sort(fp.mutable_ptrs(np), kind="stable"))


def _args(e, dirty, shape):
    """Pickles the dirty slices (and clean ones Go may not have); placeholders for the rest."""
    if e.k is None:
        e.k = slice_len(e.shadow)
    nsl = max(1, -(-len(e.shadow) // e.k))
    known = CTX["known"]
    slices, bufs = [], []
    for i in range(nsl):
        cl = e.slices[i] if dirty is not None and e.slices and i not in dirty else None
        data = b""
        if not cl or cl[0] not in known:
            data = (e.pre.pop(i, None) if e.pre else None) or _pickle_slice(e, i)
            cl = [_hash(data), len(data)]
            STATS["sliced_repickled_bytes"] += len(data)
        STATS["sliced_bytes"] += cl[1]
        pb = pickle.PickleBuffer(data)
        _PRE[id(pb)] = (pb, cl)
        slices.append(cl)
        bufs.append(pb)
    e.slices, e.pre = slices, None
    return (shape, e.k, tuple(tuple(s) for s in slices), tuple(bufs))
