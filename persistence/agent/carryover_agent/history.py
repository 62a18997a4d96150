"""The session's history graph, for replay (replay.py): one entry per turn with its code, whether it
ran without an error, how long it took, which global random generators' states it found, and its
number as the session counts turns (the kernel's execution_count when its first cell ran: the server
sets the counter of every kernel it prepares to the session's, so a turn lost with a dead kernel or
answered from a failed checkpoint keeps its number; a reply that says "turn 5" names the session's
turn 5). Which
names a turn reads and binds is derived from the code when a replay needs it (safety.py), by the same
analysis every time, so nothing that can drift is stored.

It travels in checkpoints as "state" groups that never change once written, so a turn writes only
what is new (a scalar turn stays a few hundred bytes):
- "@carryover.history.e<seq>": one entry (seq, code, ms, ok, rng index, number), a group per turn until
  BLOCK of them are folded into
- "@carryover.history.b<n>": BLOCK entries, written once;
- "@carryover.rng.<index>.<generator>": one distinct set of generator states, one group per
  generator holding exactly what "@random", "@numpy.random" or "@torch.random" holds: the states a
  turn finds are those the previous checkpoint saved under those names, so their pickles hash to
  chunks the store already has and only a small descriptor is new. The RNG_KEEP most recent sets are
  kept; an older turn's entry then says its states are gone.
Every value is a tuple the agent keeps, so snapshot._pickle_state reuses its pickle by identity.
A restore puts the groups back (apply). Only the last KEEP entries are kept: a replay that needs an
older turn says so."""

import sys
import time

BLOCK = 32
KEEP = 2048
RNG_KEEP = 64
PREFIX = "@carryover.history."
RNG_PREFIX = "@carryover.rng."


def rng_states():
    """The global generators' states, for the modules loaded now (a module imported later seeds its
    own generator then: replay sets only what the turn found)."""
    out = {}
    rnd = sys.modules.get("random")
    if rnd is not None:
        out["random"] = rnd.getstate()
    np = sys.modules.get("numpy")
    if np is not None and hasattr(getattr(np, "random", None), "get_state"):
        out["numpy"] = np.random.get_state()
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        out["torch"] = bytes(torch.get_rng_state().numpy().tobytes())
    return out


def set_rng_states(states):
    """Puts generator states back (rng_states' inverse)."""
    if "random" in states:
        sys.modules["random"].setstate(states["random"])
    if "numpy" in states and "numpy" in sys.modules:
        sys.modules["numpy"].random.set_state(states["numpy"])
    if "torch" in states and "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.set_rng_state(torch.tensor(list(states["torch"]), dtype=torch.uint8))


class TurnClock:
    """What the agent notes while a turn runs: its start, its generator states, whether a cell failed.
    pre_run_cell calls begin, post_run_cell calls end (IPython fires neither for silent executes, so
    carryover's own requests never count)."""

    def __init__(self):
        self.t0 = None
        self.rng = None
        self.ok = True
        self.number = None
        self.stored = False
        self.carried = None  # what take() answered for a snapshot Go did not commit (carry)

    def begin(self, count=None, store_history=True):
        """count: the shell's execution_count as the cell starts (the cell's own when it is stored in
        the history; the next cell's when not, so a stored cell of the same turn takes precedence)."""
        if self.t0 is None:
            self.t0 = time.perf_counter()
            self.rng = rng_states()
            self.ok = True
            self.number = None
            self.stored = False
        if count is not None and (self.number is None or (store_history and not self.stored)):
            self.number, self.stored = count, bool(store_history)

    def end(self, result):
        if getattr(result, "success", True) is False:
            self.ok = False

    def take(self):
        """(ms the turn took, rng before it, ok, its number or None), and resets for the next turn."""
        ms = (time.perf_counter() - self.t0) * 1000 if self.t0 is not None else 0.0
        out = (ms, self.rng or {}, self.ok, self.number)
        if self.carried is not None:  # the cells of a dropped snapshot come first: their start counts
            c = self.carried
            out = (c[0] + ms, c[1], c[2] and out[2], c[3] if c[3] is not None else out[3])
            self.carried = None
        self.t0, self.rng, self.ok, self.number = None, None, True, None
        return out

    def carry(self, taken):
        """Takes back what take() answered for a snapshot that was not committed: its cells run
        again in the next snapshot's turn, which then starts where they started."""
        if self.carried is not None:
            c = self.carried
            taken = (c[0] + taken[0], c[1], c[2] and taken[2], c[3] if c[3] is not None else taken[3])
        self.carried = taken


class Entry(tuple):
    """(seq, code, ms, ok, rng index or None, number or None): one turn of the history. seq is the
    agent's own count (it names the entry's group); number the session's (TurnClock.begin), absent
    from entries written before it was recorded."""
    __slots__ = ()

    turn = property(lambda self: self[0])
    code = property(lambda self: self[1])
    ms = property(lambda self: self[2])
    ok = property(lambda self: self[3])
    rng = property(lambda self: self[4])

    @property
    def number(self):
        """The turn's number as the session counts turns (the agent's own for an older entry)."""
        n = self[5] if len(self) > 5 else None
        return n if n is not None else self[0]

    def __reduce__(self):  # pickled as a plain tuple: a restore needs no class of the agent's
        return (tuple, (tuple(self),))


def reset(agent):
    agent.history = []  # [Entry]
    agent.history_base = 0  # entries dropped from the front (a multiple of BLOCK)
    agent._history_blocks = {}  # block number -> the tuple of its entries
    agent._rng = {}  # index -> {generator: state}
    agent._rng_next = 0


def record(agent, cells):
    """Appends the turn whose cells a snapshot is about to save. Returns (its entry, what the turn
    clock answered) for unrecord, or None."""
    if not cells:
        return None
    taken = agent._turn.take()
    ms, rng, ok, number = taken
    hist = agent.history
    idx = _rng_index(agent, rng)
    turn = (hist[-1].turn + 1) if hist else 1
    hist.append(Entry((turn, "\n".join(cells), round(ms, 3), ok, idx, number)))
    if len(hist) > KEEP + BLOCK:
        drop = len(hist) - KEEP
        drop -= drop % BLOCK  # whole blocks, so block boundaries (and their cached pickles) stay put
        agent.history_base += drop
        del hist[:drop]
        agent._history_blocks = {}
    _trim_rng(agent)
    return hist[-1], taken


def unrecord(agent, recorded):
    """Drops the entry record appended for a snapshot Go did not commit: its cells go back to the
    agent and are recorded again, with the next turn's, in ONE entry (kept, the same cells would be
    in two entries and a replay would run them twice)."""
    if recorded is None:
        return
    entry, taken = recorded
    if agent.history and agent.history[-1] is entry:
        agent.history.pop()
        agent._history_blocks = {}  # a block it completed is open again
    agent._turn.carry(taken)


def rng_of(agent, entry):
    """The generator states a turn found ({} when no generator module was loaded), or None when they
    are no longer kept."""
    if entry.rng is None:
        return {}
    st = agent._rng.get(entry.rng)
    return dict(st) if st is not None else None


def _rng_index(agent, rng):
    if not rng:
        return None
    last = agent._rng.get(agent._rng_next - 1)
    if last is not None and _same_rng(last, rng):
        return agent._rng_next - 1
    idx = agent._rng_next
    agent._rng[idx] = rng
    agent._rng_next += 1
    return idx


def _trim_rng(agent):
    if len(agent._rng) > RNG_KEEP:
        for i in sorted(agent._rng)[:-RNG_KEEP]:
            del agent._rng[i]


def state_items(agent):
    """[(group name, value)]: full blocks, the open entries one group each, the kept generator states."""
    out = []
    hist = agent.history
    full = len(hist) - len(hist) % BLOCK
    for i in range(0, full, BLOCK):
        n = (agent.history_base + i) // BLOCK
        block = agent._history_blocks.get(n)
        if block is None:
            block = agent._history_blocks[n] = tuple(hist[i:i + BLOCK])
        out.append((PREFIX + "b%06d" % n, block))
    for e in hist[full:]:
        out.append((PREFIX + "e%09d" % e.turn, e))
    for i, st in sorted(agent._rng.items()):
        for gen, value in sorted(st.items()):
            out.append((RNG_PREFIX + "%06d.%s" % (i, gen), value))
    _prune_cache(agent, {name for name, _ in out})
    return out


def _prune_cache(agent, names):
    cache = agent._state_cache
    for name in [n for n in cache if (n.startswith(PREFIX) or n.startswith(RNG_PREFIX)) and n not in names]:
        del cache[name]


def apply(agent, name, value):
    """Puts one group back (restore). Groups arrive in name order: blocks, then single entries, then
    the generator states."""
    if name.startswith(RNG_PREFIX):
        idx, gen = name[len(RNG_PREFIX):].split(".", 1)
        agent._rng.setdefault(int(idx), {})[gen] = value
        agent._rng_next = max(agent._rng_next, int(idx) + 1)
        return
    kind, num = name[len(PREFIX)], int(name[len(PREFIX) + 1:])
    if kind == "b":
        if not agent.history:
            agent.history_base = num * BLOCK
        entries = tuple(Entry(e) for e in value)
        agent.history.extend(entries)
        agent._history_blocks[num] = entries
    else:
        agent.history.append(Entry(value))


def _same_rng(a, b):
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if k == "numpy":
            if x[0] != y[0] or x[2:] != y[2:] or not (x[1] == y[1]).all():
                return False
        elif x != y:
            return False
    return True
