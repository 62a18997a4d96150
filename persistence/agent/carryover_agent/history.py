"""The session's history graph, for replay (replay.py): one entry per turn with its code, whether it
ran without an error, how long it took and the global random generators' states just before it ran.
Which names a turn reads and binds is derived from the code when a replay needs it (safety.py), by
the same analysis every time, so nothing that can drift is stored.

The history travels in checkpoints as "state" groups of BLOCK entries each ("@carryover.history.0007"):
a full block never changes, so its pickle is reused (snapshot._pickle_state's cache, by identity) and
its chunk is already in the store; each turn re-pickles only the open block. A restore puts the
blocks back (apply), so a replay after a kill -9 sees every turn up to the checkpoint it restores.
Only the last KEEP entries are kept: a replay that needs an older turn says so."""

import sys
import time

BLOCK = 32
KEEP = 2048
PREFIX = "@carryover.history."


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

    def begin(self):
        if self.t0 is None:
            self.t0 = time.perf_counter()
            self.rng = rng_states()
            self.ok = True

    def end(self, result):
        if getattr(result, "success", True) is False:
            self.ok = False

    def take(self):
        """(ms the turn took, rng before it, ok), and resets for the next turn."""
        ms = (time.perf_counter() - self.t0) * 1000 if self.t0 is not None else 0.0
        out = (ms, self.rng or {}, self.ok)
        self.t0, self.rng, self.ok = None, None, True
        return out


def record(agent, cells):
    """Appends the turn whose cells a snapshot is about to save. The generator states reuse the last
    entry's object when equal, so a block pickles them once."""
    if not cells:
        return
    ms, rng, ok = agent._turn.take()
    hist = agent.history
    if hist:
        last = hist[-1]["rng"]
        if _same_rng(last, rng):
            rng = last
    turn = (hist[-1]["turn"] + 1) if hist else 1
    hist.append({"turn": turn, "code": "\n".join(cells), "ms": round(ms, 3), "ok": ok, "rng": rng})
    if len(hist) > KEEP + BLOCK:
        drop = len(hist) - KEEP
        drop -= drop % BLOCK  # whole blocks, so block boundaries (and their cached pickles) stay put
        agent.history_base += drop
        del hist[:drop]
        agent._history_frozen = {}


def state_items(agent):
    """[(group name, value)]: one state group per block; full blocks are the same tuple every time."""
    out = []
    hist = agent.history
    frozen = agent._history_frozen
    base = agent.history_base // BLOCK
    for i in range(0, len(hist), BLOCK):
        idx = base + i // BLOCK
        block = hist[i:i + BLOCK]
        if len(block) == BLOCK:
            if idx not in frozen:
                frozen[idx] = tuple(block)
            out.append((PREFIX + "%06d" % idx, frozen[idx]))
        else:
            out.append((PREFIX + "%06d" % idx, list(block)))
    return out


def apply(agent, name, value):
    """Puts one block back (restore): blocks arrive in name order, so appending rebuilds the list."""
    idx = int(name[len(PREFIX):])
    if not agent.history:
        agent.history_base = idx * BLOCK
    agent.history.extend(value)
    if len(value) == BLOCK:
        agent._history_frozen[idx] = tuple(value)


def reset(agent):
    agent.history = []
    agent.history_base = 0
    agent._history_frozen = {}


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
