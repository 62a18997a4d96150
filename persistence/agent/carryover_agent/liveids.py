"""Which objects of a pickler's (or unpickler's) memo outlive the pickling: the ids a group shares by.

A memo holds every object the pickle went through, and many of them exist only for the pickling:
the state dicts ``__getstate__`` builds (a matplotlib figure makes thousands, one per artist and
transform), the argument tuples and lists of ``__reduce__``. Once the snapshot is over they are
freed and their addresses are reused by any new object. A group whose ids held them then "overlapped"
with whatever the next turn allocated there (a column list of a DataFrame the cell only displayed),
so an untouched figure was pulled in and re-pickled with it, turn after turn.

``live`` drops them: an object is a temporary when every reference to it comes from the memo
itself or from other temporaries (counted with sys.getrefcount and gc.get_referents, to a
fixpoint). The rule only ever drops an object whose every referrer it has seen drop: an object
referenced from anywhere else (the namespace, a live container, a C structure gc cannot see into)
keeps a reference the count does not explain, and stays. Keeping too much costs a needless re-pickle;
dropping a live object would lose aliasing, which this cannot do."""

import gc
import sys

from .common import _ATOMS


def _counts(objs):
    """sys.getrefcount of each object of the list objs, in order."""
    return list(map(sys.getrefcount, objs))


# The count of an object that only the list holds.
_BASE = _counts([object()])[0]


def live(values, held, shared, root):
    """The ids a group shares by: of the objects of values (an iterable over what a memo holds,
    e.g. a view of its copy), those that something other than the memo and the temporaries among
    them references, but for instances of shared, bare object()s and root. held is how many
    references to each object the caller's structures hold (the pickler's table, its copy, a list
    of them)."""
    objs = [o for o in values if type(o) not in _ATOMS]  # atoms: no referents, never a group's ids
    extra = _counts(objs)
    ids = list(map(id, objs))
    floor = _BASE + held
    todo = [i for i, n in enumerate(extra) if n <= floor]
    dead = set()
    pos = dict(zip(ids, range(len(ids)))) if todo else {}
    if len(pos) != len(ids):
        todo = []  # an object listed twice: its count would be off; keep everything
    while todo:
        i = todo.pop()
        if i in dead:
            continue
        dead.add(i)
        for child in gc.get_referents(objs[i]):
            j = pos.get(id(child))
            if j is not None and j not in dead:
                extra[j] -= 1
                if extra[j] <= floor:
                    todo.append(j)
    return {ids[i] for i, o in enumerate(objs)
            if i not in dead and not isinstance(o, shared) and type(o) is not object and o is not root}
