"""numpy object arrays of atoms (a DataFrame's string columns) pickled in slices (issue 13).

numpy pickles an object array item by item, in-band: a DataFrame with a million-row string column
costs ~300 ms at every turn that touches the frame, even one that changes a float. An object array of
at least SLICE_MIN atoms (str, int, float, bytes, bool, None), C-contiguous and owning its memory,
is reduced instead to ``_object_array(shape, k, slices, parts)``: one out-of-band buffer per slice of
k items, so only the slices whose items changed are pickled again.

Changes are found as for sliced containers (sliced.py): the array's memory is its item pointers, read
with numpy; the agent holds the previous items (the shadow) so an address cannot be reused unseen,
and atoms are immutable, so the same pointer means the same value.

Reducers have no agent: pickle_one sets what they need (the chunks Go has) in ``CTX`` and reads the
buffers they made from ``take_pre``. Entries are keyed by the array's id and hold the array; one whose
array nobody else holds any more is dropped at the next snapshot (purge)."""

import pickle
import sys

from .common import PROTOCOL, _hash
from .sliced import SLICE_MIN, STATS, _atom_ids, _memory, slice_len

_ENTRIES = {}  # id(array) -> _Entry
_PRE = {}  # id(PickleBuffer) -> (PickleBuffer, [hash, len]) made by the pickle under way
CTX = {"known": frozenset()}  # the committed state's chunks, for the pickle under way


class _Entry:
    __slots__ = ("arr", "shadow", "ptrs", "k", "slices")


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
        _ENTRIES[id(arr)] = e
    return arr


def purge():
    """Drops the entries of arrays only the agent still holds."""
    for key in [key for key, e in _ENTRIES.items() if sys.getrefcount(e.arr) <= 2]:
        del _ENTRIES[key]


def begin(known):
    """Before a pickle: the chunks Go has (a clean slice not among them is pickled again)."""
    CTX["known"] = known
    _PRE.clear()


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
    if new is None:
        _ENTRIES.pop(id(a), None)
        return None
    _ENTRIES[id(a)] = new[0]
    return (_object_array, _args(new[0], new[1], a.shape))


def _ptrs(m, a):
    start = (a.__array_interface__["data"][0] >> 3) - 1
    return m.mem[start:start + a.size].copy()


def _scan(m, np, a, e):
    """(the array's new entry, indexes of dirty slices or None for all), or None when an item is not
    an atom. The old shadow stays alive until the pointers are compared."""
    ptrs = _ptrs(m, a)
    if not ptrs.all():
        return None  # a NULL item (an array a C extension left uninitialised): nothing to read there
    n = len(ptrs)
    new = _Entry()
    new.arr, new.ptrs = a, ptrs
    if e is not None and len(e.ptrs) == n:
        changed = np.flatnonzero(ptrs != e.ptrs)
        new.k, new.slices = e.k, e.slices
        new.shadow = e.shadow if not len(changed) else a.reshape(-1).tolist()
        check = ptrs[changed]
        dirty = set((changed // e.k).tolist())
    else:
        new.shadow = a.reshape(-1).tolist()
        new.k, new.slices, check, dirty = None, None, ptrs, None
    if not np.isin(m.gather(check, 1), _atom_ids(np)).all():
        return None
    return new, dirty


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
            data = pickle.dumps(e.shadow[i * e.k:(i + 1) * e.k], PROTOCOL)
            cl = [_hash(data), len(data)]
            STATS["sliced_repickled_bytes"] += len(data)
        STATS["sliced_bytes"] += cl[1]
        pb = pickle.PickleBuffer(data)
        _PRE[id(pb)] = (pb, cl)
        slices.append(cl)
        bufs.append(pb)
    e.slices = slices
    return (shape, e.k, tuple(tuple(s) for s in slices), tuple(bufs))
