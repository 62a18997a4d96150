"""Which objects of a pickler's (or unpickler's) memo do not outlive the pickling: left out of the ids
a group shares by.

A memo holds every object the pickle went through, and many of them exist only for the pickling:
the state dicts ``__getstate__`` builds (a matplotlib figure makes thousands, one per artist and
transform), the argument tuples and lists of ``__reduce__``. Once the snapshot is over they are
freed and their addresses are reused by any new object. A group whose ids held them then "overlapped"
with whatever the next turn allocated there (a column list of a DataFrame the cell only displayed),
so an untouched figure was pulled in and re-pickled with it, turn after turn.

``temporaries`` finds them: an object is a temporary when every reference to it comes from the memo
itself or from other temporaries (counted with sys.getrefcount and gc.get_referents, to a
fixpoint). The rule only ever drops an object whose every referrer it has seen drop: an object
referenced from anywhere else (the namespace, a live container, a C structure gc cannot see into)
keeps a reference the count does not explain, and stays. Keeping too much costs a needless re-pickle;
dropping a live object would lose aliasing, which this cannot do.

``young_begin``, ``young_ids`` and ``died`` find the same temporaries without the fixpoint, when the
collector is off (the agent's ops): nothing leaves the young generation then, so every tracked
object the dump made is young after it and was not young before it; the pickling's references are
then released and the young objects that are gone are the temporaries (untracked ones, dicts of
atoms and arrays, are counted after the release instead). Objects older than the dump are never
temporaries (something held them before it). A figure's memo holds 75,000 temporaries among 132,000
objects: the fixpoint's waves cost more than the pickling."""

import gc
import sys
from collections import Counter
from itertools import compress, repeat
from operator import not_

from .common import _ATOMS



def _counts(objs):
    """sys.getrefcount of each object of the list objs, in order."""
    return list(map(sys.getrefcount, objs))


# The count of an object that only the list holds.
_BASE = _counts([object()])[0]


def sharing_ids(keys, objs, shared, root, types=None):
    """The ids (keys, in the order of objs) of the objects of objs a group shares by: not instances
    of shared (immutable or library singletons), not bare object()s, not root. Judged once per type,
    at C speed: a figure's memo holds 100,000 objects of 200 types. types: map(type, objs) as a
    list, when the caller has it (each pass touches every object: cache misses, not Python)."""
    types = list(map(type, objs)) if types is None else types
    keep = {t: _shares(t, shared) for t in set(types)}
    out = set(compress(keys, map(keep.__getitem__, types)))
    out.discard(id(root))
    return out


def _shares(t, shared):
    return not issubclass(t, shared) and t is not object


def young_begin():
    """The ids of the young generation's objects before a dump: every tracked object the dump makes
    is young after it and not among these, since no collection can come while the collector is off.
    None when it is on: the caller uses temporaries instead. (Emptying the generation with
    gc.collect(0) instead cost 9 ms when it held a list of 200,000 records: a collection traverses
    what the young objects hold; this reads only the young objects.) An id here that the dump frees
    and reuses reads as older than the dump: kept, which is safe."""
    if gc.isenabled():
        return None
    return frozenset(map(id, gc.get_objects(0)))


def young_ids(among=None, before=frozenset()):
    """The ids of the tracked objects young now and not in before (young_begin's); with among (a
    set of ids), only those in it (one pass over the young, no set of them all)."""
    if among is not None:
        return among.intersection(map(id, gc.get_objects(0))) - before
    return set(map(id, gc.get_objects(0))) - before


def untracked(objs, types, shared):
    """The objects of objs (types: their types) a group shares by (sharing_ids) that the collector
    does not track: dicts of atoms, tuples, arrays and other types without a collector slot. died
    judges them by their counts. Types are sorted out once each, so only those objects are asked."""
    maybe = {t: _shares(t, shared) and (not t.__flags__ & _HAVE_GC or issubclass(t, (dict, tuple)))
             for t in set(types)}
    out = list(compress(objs, map(maybe.__getitem__, types)))
    return list(compress(out, map(not_, map(gc.is_tracked, out))))


# Py_TPFLAGS_HAVE_GC: instances of a type with it are tracked (dicts and tuples may be untracked).
_HAVE_GC = 1 << 14


def died(cands, leaves):
    """The temporaries, once the pickling's references are released: the ids of cands (tracked
    objects the dump made, young_ids right after it) no longer alive, and the leaves (untracked memo
    objects, held by that list alone) that only the list holds now."""
    dead = cands - young_ids()  # an address reused meanwhile reads as alive: kept, which is safe
    dead.update(compress(map(id, leaves), map(_BASE.__ge__, _counts(leaves))))
    return dead


def temporaries(values, held):
    """The ids of the containers among values (what a memo holds) that only the memo and other such
    temporaries reference. held is how many references
    to each object the caller's structures hold (the pickler's table, its copy, a list of them).

    Atoms are not judged (they are never ids). An object whose references gc cannot list (a numpy
    array's base) keeps what it references counted as live: a needless re-pickle at worst."""
    # Atoms have no referents and are never a group's ids: left out (by C-level map and compress, as
    # a figure's memo holds 100,000 objects).
    vals = values if isinstance(values, list) else list(values)
    objs = list(compress(vals, map(_NOT_ATOM.get, map(type, vals), repeat(True))))
    del vals  # a list made here would hold a reference the counts below do not expect
    extra = _counts(objs)
    np = sys.modules.get("numpy")  # never imported for this: only used when the kernel has it
    if np is not None and len(objs) >= _NP_MIN:
        return _temporaries_np(np, objs, extra, _BASE + held)
    return _temporaries_py(objs, extra, _BASE + held)


_NOT_ATOM = dict.fromkeys(_ATOMS, False)

# Below this many objects the plain loop is as fast as numpy's set-up.
_NP_MIN = 2048


def _temporaries_py(objs, extra, floor):
    """temporaries' fixpoint, one Python step per reference a dead object holds."""
    wave = [i for i, n in enumerate(extra) if n <= floor]
    if not wave:
        return set()
    ids = list(map(id, objs))
    pos = dict(zip(ids, range(len(ids))))
    if len(pos) != len(ids):
        return set()  # an object listed twice: its count would be off; keep everything
    dead = set()
    while wave:
        # One wave at C speed: the references the newly dead hold, counted per object.
        dead.update(wave)
        held_by_dead = Counter(map(id, gc.get_referents(*[objs[i] for i in wave])))
        wave = []
        for k in held_by_dead.keys() & pos.keys():
            j = pos[k]
            if j not in dead:
                extra[j] -= held_by_dead[k]
                if extra[j] <= floor:
                    wave.append(j)
    return {ids[i] for i in dead}


def _temporaries_np(np, objs, extra, floor):
    """The same fixpoint with each wave's counting done by numpy: a figure's memo holds 100,000
    objects, and the per-reference Python loop cost more than pickling the figure."""
    n = len(objs)
    ids = np.fromiter(map(id, objs), dtype=np.uintp, count=n)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    if n > 1 and bool((sorted_ids[1:] == sorted_ids[:-1]).any()):
        return set()  # an object listed twice: its count would be off; keep everything
    left = np.asarray(extra, dtype=np.int64)
    dead = np.zeros(n, dtype=bool)
    wave = np.flatnonzero(left <= floor)
    while wave.size:
        dead[wave] = True
        refs = gc.get_referents(*[objs[i] for i in wave.tolist()])
        rid = np.fromiter(map(id, refs), dtype=np.uintp, count=len(refs))
        at = np.searchsorted(sorted_ids, rid)
        np.minimum(at, n - 1, out=at)
        hit = order[at[sorted_ids[at] == rid]]  # positions in objs of the referents the memo holds
        got = np.bincount(hit, minlength=n)
        left -= got
        wave = np.flatnonzero((got > 0) & (left <= floor) & ~dead)
    return set(compress(map(id, objs), dead.tolist()))
