"""The agent's memory between turns: the groups of the last snapshot (what each is, its descriptor
hash and chunks, the ids it shares by), the chunks Go is known to have and the small arrays as saved."""

import sys

from .common import _hash

# Restore order of group kinds: state last (magics name session functions, the numpy generator needs numpy).
_KIND_ORDER = {"imp": 0, "def": 1, "data": 2, "state": 3}


class _Group:
    """One unit of saving: names sharing objects (or one session definition under several names)."""

    __slots__ = ("names", "kind", "ref", "size", "ids", "chunks", "types", "mod", "attr", "warn", "figs", "owners", "digest")

    def __init__(self, names, kind):
        self.names = tuple(names)
        self.kind = kind
        self.ref = ""
        self.size = 0
        self.ids = frozenset()
        self.chunks = ()
        self.types = ()
        self.mod = None
        self.attr = None
        self.warn = None  # _verify's findings: None = not verified, () = restores as itself
        self.figs = ()  # the matplotlib figures its pickle holds, as figures.take() noted them
        self.owners = None  # name -> "module:attribute" its value is (owners.py), when all its names are
        self.digest = None  # its saved pickle's, when small and plain (pickling.dump_digest)

    def entry(self):
        e = {"k": self.kind, "n": list(self.names), "t": list(self.types)}
        if self.kind == "imp":
            e["m"] = self.mod
            if self.attr:
                e["a"] = self.attr
        else:
            e["r"] = self.ref
        if self.owners:
            e["o"] = dict(self.owners)
        return e


class _State:
    def __init__(self):
        self.groups = {}  # frozenset(names) -> _Group
        self.ids = {}  # name -> id(value) at the snapshot
        self.skipped = {}  # name -> skip entry (kept while the value is not rebound)
        self.known = set()  # chunk hashes Go has for sure (referenced by this state)
        self.full = True  # a fresh agent checks everything once
        self.recheck_all = False  # after a restore: every small group once, whatever the budget
        self.small = {}  # name -> small_print of its value as its group's saved bytes have it

    def name2group(self):
        return {n: g for g in self.groups.values() for n in g.names}


# Arrays up to this many bytes are remembered whole (small_print).
SMALL_ARRAY = 4096


def small_print(v):
    """A small numpy array, whole (its dtype, layout, flags and bytes), or None for any other value.
    A name a cell only reads (``theta`` after a loop that appended it to ``path``) is a candidate, and
    its group (path's 5,000 arrays) was pickled again to find it unchanged; a small array equal to
    its print at the last snapshot cannot have changed, nor anything through it (it owns its bytes
    and references nothing else), so its group need not be pickled for it. The bytes are kept as
    their xxh3-128 digest, as chunks are identified: 10,000 small named arrays keep 10,000 digests,
    not 40 MB of copies."""
    np = sys.modules.get("numpy")
    if np is None or type(v) is not np.ndarray or v.base is not None or v.nbytes > SMALL_ARRAY or v.dtype.hasobject:
        return None
    f = v.flags
    return (v.dtype, v.shape, v.strides, f.writeable, f.c_contiguous, f.f_contiguous, _hash(v.tobytes("A")))
