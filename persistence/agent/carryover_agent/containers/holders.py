"""Small dicts holding large containers (issue 25): a parsed API answer ``api = {'items': [...200k
records...], 'total': 200000}`` is pickled as the small dict in-band with each large container in it
in slices (sliced.py), so a turn that changes one item re-pickles the small dict and one slice, not
the whole answer.

A *holder* is a dict of fewer than HOLDER_MAX items; the large containers are its values (or values
of a holder in it, to HOLDER_DEPTH levels) that sliced.py would slice on their own. Each has its
cache under the key (name, key, ...), dropped when that path no longer leads to it. The rest of the
holder is pickled in-band at every snapshot that may have changed it: it is small. Out-of-band
buffers of that rest (a numpy array in it) stay in-band, so the group's buffers are exactly the
slices, in order, which is what a restore seeds the caches from."""

import io
import pickle
import sys

from . import sliced
from ..common import PROTOCOL, _shared_types

HOLDER_MAX = 256  # a dict with more items is no holder
HOLDER_DEPTH = 2  # api['data']['items'] is reached, not deeper


def paths(v, depth=HOLDER_DEPTH, at=()):
    """The paths (tuples of keys) of the large containers a holder holds, in pickling order."""
    out = []
    if type(v) is not dict or len(v) >= HOLDER_MAX:
        return out
    for k, x in v.items():
        if type(x) in (list, dict) and len(x) >= sliced.SLICE_MIN:
            out.append(at + (k,))
        elif type(x) is dict and depth > 1:
            out.extend(paths(x, depth - 1, at + (k,)))
    return out


def _get(v, path):
    for k in path:
        v = v[k]
    return v


def pickle_holder(agent, name, v):
    """(in-band pickle, buffers, [[hash, len]] per buffer, ids) of holder v with its large
    containers in slices, or None when it holds none that can be sliced."""
    subst, caches = {}, []
    for p in paths(v):
        inner = _get(v, p)
        key = (name,) + p
        if not sliced._sliceable(agent, key, inner):
            continue
        c = sliced._slice(agent, key, inner)
        if c is not None:
            subst[id(inner)] = c.parts
            caches.append(c)
    if not caches:
        return None
    temps = []
    copy = _copy(v, subst, temps)
    slice_bufs = {id(b): cl for c in caches for b, cl in zip(c.parts.bufs, c.slices)}
    buf, bufs, other = io.BytesIO(), [], []

    def out_of_band(pb):  # a false answer: out of band
        (bufs if id(pb) in slice_bufs else other).append(pb)
        return False

    p = pickle.Pickler(buf, protocol=PROTOCOL, buffer_callback=out_of_band)
    try:
        p.dump(copy)
    except Exception:
        return None  # the rest is not plainly picklable: the holder is pickled whole
    if other:
        return None  # the rest holds large buffers (arrays): pickled whole, their chunks deduplicated
    memo = p.memo.copy()
    pre = [slice_bufs[id(b)] for b in bufs]
    for c in caches:
        sliced._count(c, c.parts.bufs)
        c.parts = None
    skip = {id(t) for t in temps} | set(subst) | {id(x) for x in subst.values()}
    small = [i for i, (_, o) in memo.items() if i not in skip and not isinstance(o, agent._shared)]
    return buf.getvalue(), bufs, pre, _ids(caches, small + [id(v)] + _path_dicts(v))


def _copy(v, subst, temps):
    """A shallow copy of holder v with each sliced container replaced by its _Parts (and the holders
    on the way copied the same way)."""
    out = {}
    temps.append(out)
    for k, x in v.items():
        if id(x) in subst:
            out[k] = subst[id(x)]
        elif type(x) is dict and any(id(y) in subst for y in x.values()):
            out[k] = _copy(x, subst, temps)
        else:
            out[k] = x
    return out


def _path_dicts(v):
    """The ids of the holders inside holder v that lead to a large container (copied when pickled)."""
    return [id(_get(v, p[:i])) for p in paths(v) for i in range(1, len(p))]


def _ids(caches, small):
    np = sys.modules["numpy"]
    arrays = [c.ids.a for c in caches] + [np.array(small, np.int64)]
    return sliced.IdArray(np, np.sort(np.concatenate(arrays)))


def seed_holder(agent, name, obj, desc):
    """After a restore: the caches of the containers rebuilt from slices inside holder obj, each
    given its run of the group's buffers (all slices, in pickling order). Returns the group's ids,
    or None when obj holds no such container or the buffers do not add up."""
    slices = [b[2][0] for b in desc["b"] if len(b[2]) == 1]
    if len(slices) != len(desc["b"]):
        return None
    caches, off = [], 0
    for p in paths(obj):
        inner = _get(obj, p)
        hit = sliced._REBUILT.get(id(inner))
        if hit is None or hit[0] is not inner:
            continue
        nsl = max(1, -(-len(inner) // hit[1]))
        c = sliced.seed_one(agent, (name,) + p, inner, slices[off:off + nsl])
        off += nsl
        if c is None:
            return None
        caches.append(c)
    if not caches or off != len(slices):
        return None
    shared = _shared_types()
    held = {id(c.obj) for c in caches}
    small = [id(x) for x in obj.values() if id(x) not in held and not isinstance(x, shared)]
    return _ids(caches, small + [id(obj)] + _path_dicts(obj))
