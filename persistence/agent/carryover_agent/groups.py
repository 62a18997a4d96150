"""The agent's memory between turns: the groups of the last snapshot (what each is, its descriptor
hash and chunks, the ids it shares by) and the chunks Go is known to have."""

# Restore order of group kinds: state last (magics name session functions, the numpy generator needs numpy).
_KIND_ORDER = {"imp": 0, "def": 1, "data": 2, "state": 3}


class _Group:
    """One unit of saving: names sharing objects (or one session definition under several names)."""

    __slots__ = ("names", "kind", "ref", "size", "ids", "chunks", "types", "mod", "attr", "warn", "figs", "owners")

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

    def name2group(self):
        return {n: g for g in self.groups.values() for n in g.names}

