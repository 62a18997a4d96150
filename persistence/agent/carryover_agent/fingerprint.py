"""Fingerprints of the values a checkpoint could not save (its "skipped" names), so a replay
(replay.py) can check that what it rebuilt is what the kernel held, not only that the turns were safe
to run again.

A fingerprint is a tuple of (key, value) pairs of plain atoms, taken at every snapshot for every
skipped name (the value may have changed in place since the turn that made it: that is what it must
catch), and saved as the "state" group "@carryover.fp.<name>". Unchanged, it equals the last one, so
snapshot._pickle_state reuses its pickle and the group's chunk is already stored: it writes nothing.
A session with nothing skipped takes none and stores none.

What is taken, by type; bounded in cost (DATA_MAX bytes hashed per value and TOTAL_MAX per snapshot,
ATTRS attributes looked at):
- a torch tensor: shape, dtype, requires_grad, its grad_fn's type (or none), and the xxh3 of its data
  (detach().cpu(), as bytes) when it holds at most DATA_MAX bytes; above that "data" says it was not
  hashed, and only the rest is compared;
- a numpy array the same way (shape, dtype, data);
- a generator: its code's qualified name, whether it is finished, the instruction it is suspended at,
  and its locals that are atoms (by value, long ones by hash) or range iterators (range and position);
  the state of anything else it holds (an iterator over a list, a file) is not compared;
- anything else: its type's qualified name, and the arrays and tensors among its first ATTRS
  attributes (an unpicklable holder of a lock and an array), fingerprinted as above.
A mismatch is always a real difference (the comparison is of what the types define as their value),
so a replay whose result differs is refused; a match proves only what the fingerprint holds."""

import sys
import types

from .common import _hash

PREFIX = "@carryover.fp."
DATA_MAX = 4 << 20  # bytes of a tensor's or array's data hashed; above this the data is not compared
TOTAL_MAX = 32 << 20  # bytes hashed per snapshot, all skipped values together; past it, data is not hashed
ATTRS = 32  # attributes of a holder looked at
ATOM_MAX = 64  # str/bytes locals kept by value up to this length, by hash above


class _Budget:
    """Bytes a snapshot may still hash."""

    def __init__(self, left):
        self.left = left

    def spend(self, n):
        """Whether n more bytes may be hashed (and counts them when so)."""
        if n > DATA_MAX or n > self.left:
            return False
        self.left -= n
        return True


def take(v, budget=None):
    """The fingerprint of v: a tuple of (key, value) pairs, never raising."""
    try:
        return tuple(_take(v, "", budget or _Budget(TOTAL_MAX)))
    except Exception as e:  # a value whose attributes raise: its type at least
        return (("type", _qualname(type(v))), ("error", type(e).__name__))


def _take(v, pre, budget):
    out = [(pre + "type", _qualname(type(v)))]
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    if torch is not None and isinstance(v, torch.Tensor):
        out += _tensor(torch, v, pre, budget)
    elif np is not None and isinstance(v, np.ndarray):
        out += _array(v, pre, budget)
    elif isinstance(v, types.GeneratorType):
        out += _generator(v, pre)
    elif not pre:
        d = getattr(v, "__dict__", None)
        if isinstance(d, dict):
            for k in sorted(d)[:ATTRS]:
                a = d[k]
                if (torch is not None and isinstance(a, torch.Tensor)) or (np is not None and isinstance(a, np.ndarray)):
                    out += _take(a, "%s." % k, budget)
    return out


def _unhashed(n):
    if n > DATA_MAX:
        return "not hashed (%d bytes, over %d)" % (n, DATA_MAX)
    return "not hashed (%d bytes, over what this snapshot may still hash of %d)" % (n, TOTAL_MAX)


def _tensor(torch, t, pre, budget):
    gf = t.grad_fn
    out = [(pre + "shape", tuple(t.shape)), (pre + "dtype", str(t.dtype)),
           (pre + "requires_grad", int(t.requires_grad)), (pre + "grad_fn", type(gf).__name__ if gf is not None else "none")]
    n = t.numel() * t.element_size()
    if not budget.spend(n):
        return out + [(pre + "data", _unhashed(n))]
    try:
        d = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
        return out + [(pre + "data", _hash(memoryview(d)))]
    except Exception as e:  # sparse, quantized, meta: no plain bytes
        return out + [(pre + "data", "not hashed (%s)" % type(e).__name__)]


def _array(a, pre, budget):
    out = [(pre + "shape", tuple(a.shape)), (pre + "dtype", str(a.dtype))]
    if a.dtype.hasobject:
        return out + [(pre + "data", "not hashed (object array)")]
    if not budget.spend(a.nbytes):
        return out + [(pre + "data", _unhashed(a.nbytes))]
    import numpy as np

    return out + [(pre + "data", _hash(memoryview(np.ascontiguousarray(a)).cast("B")))]


def _generator(g, pre):
    out = [(pre + "code", g.gi_code.co_qualname if hasattr(g.gi_code, "co_qualname") else g.gi_code.co_name)]
    f = g.gi_frame
    if f is None:
        return out + [(pre + "finished", 1)]
    out += [(pre + "finished", 0), (pre + "at", f.f_lasti)]
    for k, v in sorted(f.f_locals.items()):
        if type(v) in (int, float, bool, type(None)):
            out.append((pre + "local " + k, repr(v)))
        elif type(v) in (str, bytes):
            out.append((pre + "local " + k, repr(v) if len(v) <= ATOM_MAX else "hash " + _hash(v if type(v) is bytes else v.encode("utf-8", "surrogatepass"))))
        elif type(v).__name__ == "range_iterator":
            _, (rng,), pos = v.__reduce__()
            out.append((pre + "local " + k, "range(%d, %d, %d) at %d" % (rng.start, rng.stop, rng.step, pos)))
    return out


def _qualname(t):
    return "%s.%s" % (getattr(t, "__module__", "?"), getattr(t, "__qualname__", t.__name__))


def differs(saved, rebuilt):
    """Why a rebuilt value's fingerprint is not the saved one ("shape (2, 1) vs (1, 1)": rebuilt,
    then saved), or "" when everything both hold agrees."""
    s, r = dict(saved), dict(rebuilt)
    for k, v in saved:
        w = r.get(k, "absent")
        data = k == "data" or k.endswith(".data")
        if data and (str(v).startswith("not hashed") or str(w).startswith("not hashed")):
            continue  # not compared (too large, no plain bytes): the rest of the fingerprint is
        if w != v:
            if data:
                return "%s (same shape and dtype, other values)" % ("its data" if k == "data" else k)
            return "%s %s vs %s" % (k, _show(w), _show(v))
    extra = [k for k in r if k not in s]
    if extra:
        return "%s %s vs absent" % (extra[0], _show(r[extra[0]]))
    return ""


def _show(v):
    if isinstance(v, tuple):
        return "(%s)" % (", ".join(map(str, v)) + ("," if len(v) == 1 else ""))
    return str(v)


def state_items(agent, skipped):
    """[(group name, fingerprint)] for the skipped variables of this snapshot (kept on the agent, so
    an unchanged one is the very tuple its cached pickle was made of)."""
    prints = agent._fingerprints
    if not skipped and not prints:
        return []  # nothing skipped: no cost
    keep = {}
    budget = _Budget(TOTAL_MAX)
    for n in sorted(skipped):
        if not n.isidentifier() or str(skipped[n].get("reason", "")).startswith("saved, but") or n not in agent.ns:
            continue
        fp = take(agent.ns[n], budget)
        old = prints.get(n)
        keep[n] = old if old == fp else fp
    agent._fingerprints = keep
    cache = agent._state_cache
    for name in [k for k in cache if k.startswith(PREFIX) and k[len(PREFIX):] not in keep]:
        del cache[name]
    return [(PREFIX + n, fp) for n, fp in sorted(keep.items())]


def compared(fp):
    """What a match of fp proves, for the report: "shape, dtype, requires_grad, grad_fn, data"."""
    keys = []
    for k, v in fp:
        top = k
        if (k == "data" or k.endswith(".data")) and str(v).startswith("not hashed"):
            continue
        if k.startswith("local "):
            top = "locals"
        elif "." in k:
            top = k.split(".", 1)[0] + "'s " + k.split(".", 1)[1]
        if top not in keys:
            keys.append(top)
    return ", ".join(keys)


def apply(agent, name, value):
    """Puts one saved fingerprint back (restore)."""
    agent._fingerprints[name[len(PREFIX):]] = tuple(value)
