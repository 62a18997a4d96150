"""Nested records (engine v3, issue 25): what a sliced container's items hold below their first
level, walked at numpy speed, and fingerprints that find every write at any depth.

An item of a sliced container (or of a sliced object array) may be a *JSON-like value*: an atom, or a
dict, list, tuple, set or frozenset of JSON-like values, nested at most MAX_DEPTH levels (the shapes
``json.loads`` produces, plus tuples and sets). ``walk`` checks that, level by level, and records:
* a *fingerprint* of every mutable container below the items: a dict's version tag (ma_version_tag,
  which CPython 3.11 changes at every modification of that dict, PEP 509); a list's size and its
  item pointers; a set's mask and its table's key pointers (lists and sets have no version tag);
* the *owner* of each entry: the position of the container item it lies in (its slice is owner // k);
* the *keep*: a reference to every object it walked (containers and atoms).

``changed`` re-reads the fingerprints from memory and answers the owners whose fingerprint differs.
Why it cannot miss a write (docs/persistence.md, "Why a nested write cannot be missed"):
* every object walked at the last save is still alive (the keep), so no other object can be at its
  address: the same pointer is the same object;
* atoms, tuples and frozensets are immutable; what a tuple or frozenset holds was walked too;
* a dict holds the same keys and values while its tag is unchanged (any insert, delete, value
  change, clear or pop gives it a new, never-used tag; the self-test checks each on a live dict);
* a list's content is exactly its size and its item pointers, compared all; a set's membership is
  exactly the keys in its table, compared all (a write changes a slot's pointer: the key stored, a
  dummy or NULL);
so by induction from the items down, an owner whose fingerprints all match holds, at every depth,
the same objects with the same contents as when it was pickled: its slice's pickle is unchanged.
Memory is read only inside live objects (the keep holds them) and within their current sizes."""

import os
from itertools import chain, compress
from operator import itemgetter

from ..common import _ATOMS

MAX_DEPTH = 8  # levels below an item; deeper values make the container irregular (pickled whole)
_CONTAINERS = (dict, list, tuple, set, frozenset)
# Test-only: set (to anything) in the kernel's environment, every slice is taken as unchanged. The
# mutation tests must then fail: that is how they show they test the change detection.
NO_DETECTION_ENV = "CARRYOVER_AGENT_NO_CHANGE_DETECTION"


def detection_off():
    return bool(os.environ.get(NO_DETECTION_ENV))


class Irregular(Exception):
    """The value is not JSON-like (another type, or nested too deep); args[0] says why."""


class Fingerprint:
    """The fingerprints of the mutable containers below some items, by kind, each with its owner:
    d* dicts (pointer, tag), l* lists (pointer, size, offsets into litems, the items' pointers),
    s* sets (pointer, mask, offsets into skeys, the table's key words). keep holds the walked
    objects; nobj counts the objects the live entries stand for, nkeep what keep holds."""

    __slots__ = ("dptr", "dtag", "down", "lptr", "lsize", "loff", "litems", "lown", "sptr", "smask", "soff",
                 "skeys", "sown", "keep", "nobj", "nkeep")

    def __init__(self, np):
        e = np.zeros(0, np.int64)
        self.dptr = self.dtag = self.down = self.lptr = self.lsize = self.loff = self.litems = self.lown = e
        self.sptr = self.smask = self.soff = self.skeys = self.sown = e
        self.keep, self.nobj, self.nkeep = [], 0, 0

    def mutable_ptrs(self, np):
        """The addresses of the mutable containers (what sharing is decided by)."""
        return np.concatenate([self.dptr, self.lptr, self.sptr])

    def owner_of(self, np, ptr):
        """The owner of the mutable container at ptr, or None."""
        for p, o in ((self.dptr, self.down), (self.lptr, self.lown), (self.sptr, self.sown)):
            at = (p == np.int64(ptr)).nonzero()[0]
            if len(at):
                return int(o[at[0]])
        return None


def _any_of(ty, types):
    out = ty == id(types[0])
    for t in types[1:]:
        out |= ty == id(t)
    return out


_ATOM_TYPES = tuple(_ATOMS)
_ATOM_IDS = frozenset(map(id, _ATOM_TYPES))
_CONTAINER_IDS = frozenset(map(id, _CONTAINERS))
_KEYS_OK = _ATOMS | {tuple, frozenset}
_PARTS = ("dptr", "dtag", "down", "lptr", "lsize", "litems", "lown", "sptr", "smask", "skeys", "sown")


def walk(m, objs, ptrs, owners, top_dicts=True, after=None):
    """The Fingerprint of what objs (a list, its pointers and owners as int64 arrays) hold. With
    top_dicts False the dicts among objs themselves get no tag entry (the caller tracks them).
    after(end), when given, is called each time objs[:end] are walked (a first save pickles its
    slices there, while their objects are in the CPU cache). Raises Irregular.

    Level by level, each level's containers in batches of one type. Types, sizes, dict entries and
    item pointers are read with numpy gathers; Python iterates only to hold references (the keep:
    every container, and the items of lists and sets, whose fingerprint is their pointers) and to
    fetch the next level's containers. A dict's values are its own as long as its tag holds, and a
    tuple's forever: atoms below them are not held. The items are walked BLOCK at a time; keep
    holds them through objs itself, not through copies of its blocks (8 bytes an item)."""
    np = m.np
    fp = Fingerprint(np)
    fp.keep.append(objs)
    parts = {k: [] for k in _PARTS}
    count = 0
    for a in range(0, len(ptrs), BLOCK):
        b = a + BLOCK
        block = objs if a == 0 and b >= len(objs) else objs[a:b]
        count += _walk_block(m, fp, parts, block, ptrs[a:b], owners[a:b], top_dicts)
        if after is not None:
            after(min(b, len(objs)))
    for k, v in parts.items():
        if v:
            setattr(fp, k, np.concatenate(v))
    fp.loff = _offsets(np, fp.lsize)
    fp.soff = _offsets(np, fp.smask + 1)
    fp.nobj = fp.nkeep = count
    return fp


# Items walked at a time. The walk reads each object several times (its type, then its size or
# table, then its items); a block's objects are still in the CPU cache at the later reads. Walking
# 200,000 records whole took twice as long: each read of each level missed the cache.
BLOCK = 16384


def _walk_block(m, fp, parts, objs, ptrs, owners, top_dicts):
    """Walks objs level by level into fp and parts; returns how many objects it walked."""
    batches = _containers(m, ptrs, lambda mask: (objs if mask.all() else list(compress(objs, mask.tolist())),
                                                owners[mask]))
    count, level = len(ptrs), 0
    while batches:
        if level == MAX_DEPTH:
            raise Irregular("nested deeper than %d levels" % MAX_DEPTH)
        nxt = []
        for t, sel, sp, so in batches:
            if level:  # the items themselves are held through objs (walk)
                fp.keep.append(sel)
            n, kids = _WALKERS[t](m, parts, fp, sel, sp, so, level > 0 or top_dicts)
            count += n
            nxt.extend(kids)
        batches, level = nxt, level + 1
    return count


def _containers(m, ptrs, pick):
    """The containers among the objects at ptrs, in batches of one type (type, objects, pointers,
    owners), after checking each object is an atom or a container. pick(mask) answers the objects
    where mask holds and their owners; it is called only when there are containers."""
    np = m.np
    if not len(ptrs):
        return []
    ty = m.gather(ptrs, 1)
    t0 = int(ty[0])
    if (ty == t0).all():  # one type (a column of records, the items of tag lists): one comparison
        if t0 in _ATOM_IDS:
            return []
        if t0 not in _CONTAINER_IDS:
            raise Irregular("holds a %s" % _type_name(t0))
        cont = np.ones(len(ty), bool)
    else:
        cont = _any_of(ty, _CONTAINERS)
        bad = ~(cont | _any_of(ty, _ATOM_TYPES))
        if bad.any():
            raise Irregular("holds a %s" % _type_name(ty[bad][0]))
        if not cont.any():
            return []
    objs, co = pick(cont)
    cp, ct = ptrs[cont], ty[cont]
    if not np.array_equal(m.list_ptrs(objs), cp):  # the objects fetched are the ones read
        raise Irregular("changed while it was saved")
    out = []
    for t in _CONTAINERS:
        mk = ct == id(t)
        if mk.any():
            out.append((t, _select(np, objs, mk), cp[mk], co[mk]))
    return out


def _select(np, objs, mask):
    """objs where mask holds: a slice when those are one run (a column of records), else compress."""
    at = np.flatnonzero(mask)
    a, b = int(at[0]), int(at[-1]) + 1
    if b - a == len(at):
        return objs if b - a == len(objs) else objs[a:b]
    return list(compress(objs, mask.tolist()))


def _type_name(tp):
    """The name of the type at address tp (the type of a live object the walk holds)."""
    import ctypes

    return ctypes.cast(int(tp), ctypes.py_object).value.__name__


def _flatten(sel):
    """The items of the containers sel, in order, as one list (holding them)."""
    out = []
    add = out.extend
    for x in sel:
        add(x)
    return out


def _items(m, sel, sp, size_word):
    """The sizes (the word size_word of each container at sp) and the items, in order, of the
    containers sel, checked against each other: a container that changed size between the two
    reads raises Irregular."""
    n = m.gather(sp, size_word)
    got = _flatten(sel)
    if len(got) != int(n.sum()):
        raise Irregular("changed while it was saved")
    return n, got


def _seq_pick(np, got, so, n):
    """pick over the items got of containers whose owners are so and sizes n."""
    return lambda mask: (list(compress(got, mask.tolist())), np.repeat(so, n)[mask])


def _lists(m, parts, fp, sel, sp, so, tag):
    """A batch of lists: fingerprint (size, item pointers), items held."""
    n, got = _items(m, sel, sp, 2)  # ob_size
    ip = m.list_ptrs(got)
    parts["lptr"].append(sp)
    parts["lsize"].append(n)
    parts["litems"].append(ip)
    parts["lown"].append(so)
    fp.keep.append(got)
    return len(got), _containers(m, ip, _seq_pick(m.np, got, so, n))


def _tuples(m, parts, fp, sel, sp, so, tag):
    """A batch of tuples: immutable, no fingerprint; what they hold is walked."""
    n, got = _items(m, sel, sp, 2)  # ob_size
    return len(got), _containers(m, m.list_ptrs(got), _seq_pick(m.np, got, so, n))


def _sets(m, parts, fp, sel, sp, so, tag):
    """A batch of sets or frozensets: a set's fingerprint is its mask and table key words (its
    members held); a frozenset is immutable."""
    n, got = _items(m, sel, sp, 3)  # used
    if type(sel[0]) is set:
        mask_ = m.gather(sp, m.SET_MASK)
        parts["sptr"].append(sp)
        parts["smask"].append(mask_)
        parts["skeys"].append(_set_keys(m, sp, mask_ + 1))
        parts["sown"].append(so)
        fp.keep.append(got)
    return len(got), _containers(m, m.list_ptrs(got), _seq_pick(m.np, got, so, n))


def _dicts(m, parts, fp, sel, sp, so, tag):
    """A batch of dicts: fingerprint the version tag (with tag), values from the entry tables."""
    np = m.np
    if tag:
        parts["dptr"].append(sp)
        parts["dtag"].append(m.gather(sp, m.DICT_TAG))
        parts["down"].append(so)
    got = _table(m, sp)
    if got is None:
        return _dicts_py(m, sel, sp, so)
    keys, vals, cnt = got
    regular = keys.ndim == 2 and (keys == keys[0]).all()  # records: one row of keys to check
    kt = m.gather(keys[0] if regular else keys.reshape(-1), 1)
    ok = _any_of(kt, _ATOM_TYPES)
    if not ok.all():
        if _any_of(kt[~ok], (tuple, frozenset)).all():
            return _dicts_py(m, sel, sp, so)  # tuple keys are walked too
        raise Irregular("a key is a %s" % _type_name(kt[~ok][0]))
    if regular:
        pick = _column_pick(np, sel, keys[0], so)
        if pick is not None:
            return vals.size, _containers(m, vals.T.reshape(-1), pick)
    vals = vals.reshape(-1)
    return len(vals), _containers(m, vals, lambda mask: (list(compress(_values(sel), mask.tolist())),
                                                         np.repeat(so, cnt)[mask]))


def _values(sel):
    return list(chain.from_iterable(map(dict.values, sel)))


def _column_pick(np, sel, kp, so):
    """pick over dict values taken column by column (the values matrix transposed) when every dict
    has the same keys in the same order (records): one itemgetter per column that holds
    containers, no pass over the atoms. None when the keys are not those of sel[0]."""
    keys = list(sel[0])
    if [id(k) for k in keys] != kp.tolist():
        return None
    n = len(sel)

    def pick(mask):
        objs, own = [], []
        for j, key in enumerate(keys):
            mj = mask[j * n:(j + 1) * n]
            if mj.any():
                col = list(map(itemgetter(key), sel))
                objs += col if mj.all() else compress(col, mj.tolist())
                own.append(so[mj])
        return objs, np.concatenate(own)
    return pick


def _table(m, sp):
    """(key pointers, value pointers, entries per dict) of dicts sp read from their entry tables:
    (n, c) matrices when all have c entries and none deleted, else flat. None when the tables
    cannot be read (the layout self-test failed, or a split table)."""
    np = m.np
    if not m.tables:
        return None
    kp = m.gather(sp, m.DICT_KEYS)
    head, nent = m.gather(kp, 1), m.gather(kp, 3)
    kind = (head >> 16) & 0xFF  # dk_kind: 0 general, 1 str keys, 2 split (values apart: ma_values)
    if (kind > 1).any():
        return None
    stride = 3 - kind  # entries (hash, key, value) or (key, value)
    start = ((kp + 32 + (np.int64(1) << ((head >> 8) & 0xFF))) >> 3) - 1  # past dk_indices
    c, s = int(nent[0]), int(stride[0])
    if (nent == c).all() and (stride == s).all():
        words = m.mem.take((start[:, None] + np.arange(c * s, dtype=np.int64)).reshape(-1)).reshape(len(sp), c, s)
        keys, vals = words[:, :, s - 2], words[:, :, s - 1]
        if vals.all():  # no deleted entry (its value is NULL)
            return keys, vals, nent
    tot, used = int(nent.sum()), m.gather(sp, 2)
    rs = np.repeat(stride, nent)
    at = np.repeat(start, nent) + rs * (np.arange(tot, dtype=np.int64) - np.repeat(_offsets(np, nent), nent))
    keys, vals = m.mem.take(at + (rs - 2)), m.mem.take(at + (rs - 1))
    live = vals != 0
    if not np.array_equal(np.bincount(np.repeat(np.arange(len(sp)), nent)[live], minlength=len(sp)), used):
        raise Irregular("changed while it was saved")
    return keys[live], vals[live], used


def _dicts_py(m, sel, sp, so):
    """A batch of dicts whose tables are not read (split tables, tuple or frozenset keys): keys and
    values from Python."""
    np = m.np
    n = m.gather(sp, 2)  # ma_used
    kt = set(map(type, chain.from_iterable(sel)))
    if not kt <= _KEYS_OK:
        raise Irregular("a key is a %s" % next(iter(kt - _KEYS_OK)).__name__)
    if kt <= _ATOMS:
        got, own = _values(sel), np.repeat(so, n)
    else:  # tuple keys: walked too (they may hold anything hashable)
        got = list(chain(chain.from_iterable(sel), chain.from_iterable(map(dict.values, sel))))
        own = np.concatenate([np.repeat(so, n)] * 2)
    if len(got) != len(own):
        raise Irregular("changed while it was saved")
    return len(got), _containers(m, m.list_ptrs(got), lambda mask: (list(compress(got, mask.tolist())), own[mask]))


_WALKERS = {dict: _dicts, list: _lists, tuple: _tuples, set: _sets, frozenset: _sets}


def _offsets(np, counts):
    out = np.zeros(len(counts), np.int64)
    if len(counts) > 1:
        np.cumsum(counts[:-1], out=out[1:])
    return out


def _set_keys(m, sp, slots):
    """The key word of every slot of each set's table (stride 2: key, hash)."""
    np = m.np
    table = m.gather(sp, m.SET_TABLE)
    return m.mem[_flat_index(np, (table >> 3) - 1, slots, 2)]


def _flat_index(np, starts, counts, stride):
    """Word indexes starts[j] + stride * i for i < counts[j], all j, in order."""
    tot = int(counts.sum())
    if not tot:
        return np.zeros(0, np.int64)
    first = _offsets(np, counts)
    return np.repeat(starts - stride * first, counts) + stride * np.arange(tot, dtype=np.int64)


def changed(m, fp):
    """The owners (int64, maybe repeated) whose fingerprints no longer match memory."""
    np = m.np
    if detection_off():
        return np.zeros(0, np.int64)
    out = []
    if len(fp.dptr):
        out.append(fp.down[m.gather(fp.dptr, m.DICT_TAG) != fp.dtag])
    if len(fp.lptr):
        size, items = _pair(m, fp.lptr, 2)  # ob_size, ob_item
        out.append(_seq_changed(m, fp.lptr, fp.lsize, size, items, fp.loff, fp.litems, fp.lown, 1))
    if len(fp.sptr):
        mask, table = _pair(m, fp.sptr, m.SET_MASK)
        out.append(_seq_changed(m, fp.sptr, fp.smask + 1, mask + 1, table, fp.soff, fp.skeys, fp.sown, 2))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _pair(m, ptrs, off):
    """Words off and off + 1 of each object (two gathers: faster than one of shape (n, 2))."""
    return m.gather(ptrs, off), m.gather(ptrs, off + 1)


def _seq_changed(m, ptr, then_n, now_n, base, off, then_words, own, stride):
    """Owners of sequences (list items, set slots) whose count or words differ. Reads only the first
    min(then, now) words of each: the current allocation holds at least now."""
    np = m.np
    resized = now_n != then_n
    bad = [own[resized]]
    start = (base >> 3) - 1
    if not resized.any():
        c = int(then_n[0])
        if c and stride == 1 and (then_n == c).all():  # lists all of one size (fixed-shape records)
            return np.concatenate(bad + [own[_rows_changed(m, start, c, then_words)]])
        cnt, then = then_n, then_words
    else:
        cnt = np.where(resized, 0, then_n)
        then = then_words[_flat_index(np, off, cnt, 1)]
    if int(cnt.sum()):
        now = m.mem[_flat_index(np, start, cnt, stride)]
        diff = np.flatnonzero(now != then)
        if len(diff):
            bad.append(own[np.searchsorted(np.cumsum(cnt), diff, side="right")])
    return np.concatenate(bad)


_ROWS = 65536  # lists compared at a time by _rows_changed


def _rows_changed(m, start, c, then):
    """Indexes j of the lists whose c item words at word start[j] differ from then[j * c:(j + 1) * c].
    In runs of _ROWS lists: the temporaries stay small (one index array and one read of all 2M items
    of a million lists were 32 MB, allocated anew each turn: fresh pages, whose faults made this
    read take 14 to 85 ms from one run to the next; 11-13 ms in runs)."""
    np = m.np
    ar = np.arange(c, dtype=np.int64)
    out = []
    for a in range(0, len(start), _ROWS):
        now = m.mem.take((start[a:a + _ROWS, None] + ar).reshape(-1))
        d = np.flatnonzero(now != then[a * c:(a + _ROWS) * c])
        if len(d):
            out.append(d // c + a)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def merge(np, old, new, drop):
    """old without the entries whose owner is in drop (a bool mask over owners, True = drop) plus
    new's entries. Returns (the merged Fingerprint, pointers dropped, pointers added) of the mutable
    containers. old's keep is kept too (its objects stay alive: harmless, counted in nkeep).

    old is used up: when new's entries can take the places of those dropped one for one (an edit
    that kept the records' shape), they are written over them in old's arrays (_in_place); else the
    arrays are built anew (_rebuilt), ~50 MB for a million records, whose fresh pages made the
    first edit after a save take 15 to 90 ms from one run to the next."""
    at = {p: np.flatnonzero(_in_drop(np, getattr(old, p + "own"), drop)) for p in "dls"}
    gone = np.concatenate([getattr(old, p + "ptr")[at[p]] for p in "dls"])
    added = np.concatenate([getattr(new, p + "ptr") for p in "dls"])
    fp = _in_place(np, old, new, at) or _rebuilt(np, old, new, at)
    fp.keep = old.keep + new.keep
    fp.nkeep = old.nkeep + new.nkeep
    fp.nobj = old.nobj + new.nobj  # an upper bound of the live objects: drops are not counted off
    return fp, gone, added


def _in_place(np, old, new, at):
    """old with new's entries written over the dropped ones (at: their positions, by kind), when
    there are as many of each kind and the lists and sets are of the same sizes, in order; else None."""
    if any(len(at[p]) != len(getattr(new, p + "ptr")) for p in "dls") or not (
            np.array_equal(old.lsize[at["l"]], new.lsize) and np.array_equal(old.smask[at["s"]], new.smask)):
        return None
    for p, cols in (("d", ("ptr", "tag", "own")), ("l", ("ptr", "own")), ("s", ("ptr", "own"))):
        for c in cols:
            getattr(old, p + c)[at[p]] = getattr(new, p + c)
    old.litems[_flat_index(np, old.loff[at["l"]], new.lsize, 1)] = new.litems
    old.skeys[_flat_index(np, old.soff[at["s"]], new.smask + 1, 1)] = new.skeys
    return old


def _rebuilt(np, old, new, at):
    """A new Fingerprint of old's entries but those at (by kind) and new's (no keep)."""
    fp = Fingerprint(np)
    for p, cols in (("d", ("ptr", "tag")), ("l", ("ptr", "size")), ("s", ("ptr", "mask"))):
        keep_o = np.ones(len(getattr(old, p + "own")), bool)
        keep_o[at[p]] = False
        for c in cols + ("own",):
            setattr(fp, p + c, np.concatenate([getattr(old, p + c)[keep_o], getattr(new, p + c)]))
        if p == "l":
            fp.litems = np.concatenate([_words_of(np, old.lsize, old.loff, old.litems, keep_o), new.litems])
            fp.loff = _offsets(np, fp.lsize)
        elif p == "s":
            fp.skeys = np.concatenate([_words_of(np, old.smask + 1, old.soff, old.skeys, keep_o), new.skeys])
            fp.soff = _offsets(np, fp.smask + 1)
    return fp


def _in_drop(np, own, drop):
    inside = own < len(drop)
    out = np.ones(len(own), bool)
    out[inside] = drop[own[inside]]
    return out


def _words_of(np, counts, off, words, keep):
    """The words of the kept sequences, in order (a row mask when all have one length)."""
    c = int(counts[0]) if len(counts) else 0
    if c and len(words) == len(counts) * c and (counts == c).all():
        return words.reshape(len(counts), c)[keep].reshape(-1)
    return words[np.repeat(keep, counts)]


def selftest(m):
    """The layouts walk and changed read, checked on live objects: sizes of dicts, lists, tuples and
    sets, list items, set tables."""
    np = m.np
    d, lst, tup = {"a": 1, "b": 2}, [5, "x", None], (1, 2, 3, 4)
    if m.word(id(d), 2) != 2 or m.word(id(lst), 2) != 3 or m.word(id(tup), 2) != 4:
        return False
    s = {10 ** 20 + i for i in range(5)}
    fs = frozenset((1, 2))
    if m.word(id(s), 3) != 5 or m.word(id(fs), 3) != 2:
        return False
    keys = _set_keys(m, np.array([id(s)], np.int64), np.array([m.word(id(s), m.SET_MASK) + 1], np.int64))
    if sorted(int(k) for k in keys if k and int(k) in {id(x) for x in s}) != sorted(id(x) for x in s):
        return False
    before = keys.copy()
    x = next(iter(s))
    s.discard(x)
    after = _set_keys(m, np.array([id(s)], np.int64), np.array([m.word(id(s), m.SET_MASK) + 1], np.int64))
    return len(after) == len(before) and (after != before).sum() == 1 and id(x) not in set(after.tolist())
