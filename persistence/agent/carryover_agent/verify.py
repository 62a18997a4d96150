"""The re-pickle detector: a small changed group is unpickled in process and compared with the live
values, so a custom __reduce__/__getstate__ that restores something else is reported ("saved, but
...") instead of passed off as restored."""

import pickle

from .common import _ATOMS, _NO_ALIAS, _reason, _typename



VERIFY_MAX = 64 << 10  # groups up to this size (pickle + buffers) are unpickled again and compared


def _verify(r, cur):
    """Cheap check that a small, changed group restores as itself: unpickle it in process and compare
    each value with the live one where the comparison is definite (same type; a real __eq__ answering
    False, or, for a class with its own pickling, differing plain attributes). A custom __reduce__ or
    __getstate__ that restores something else is then reported (the group is still saved: it is what
    pickling can do) instead of passed off as restored. Returns the skipped entries, () when none."""
    if r.fmt != "p" or r.pre is not None or len(r.data) + sum(len(b.raw()) for b in r.buffers) > VERIFY_MAX:
        return ()
    if any(str(getattr(type(cur[n]), "__module__", "")).split(".")[0] in _NO_VERIFY for n in r.names):
        return ()
    if not any(_comparable(type(cur[n])) for n in r.names):
        return ()  # nothing _differs_from could decide: do not unpickle at all
    try:
        obj = pickle.loads(r.data, buffers=r.buffers)
    except Exception as e:
        bad = {n: "does not load back: %s" % _reason(e) for n in r.names}
    else:
        values = [obj] if len(r.names) == 1 else list(obj)
        bad = {}
        for n, back in zip(r.names, values):
            why = _differs_from(cur[n], back)
            if why:
                bad[n] = why
    return tuple({"name": n, "type": _typename(cur[n]), "reason": "saved, but " + bad[n]} for n in sorted(bad))


def _differs_from(live, back):
    """Why back (a live value pickled and unpickled) is not live, or "" when equal or undecidable."""
    t = type(live)
    if t in _ATOMS or t in (list, dict, tuple, set, frozenset) or isinstance(live, _NO_ALIAS):
        return ""
    if type(back) is not t:
        return "restores as %s, not %s (its pickling reduces it to another type)" % (type(back).__name__, t.__name__)
    if t.__eq__ is not object.__eq__:
        try:
            same = live == back
        except Exception:
            return ""
        if same is False and _self_equal(live):
            return "restores unequal to itself (its __reduce__/__getstate__ does not save all of it)"
        return ""
    if not _custom_pickling(t):
        return ""  # object's own pickling restores the __dict__ as it is
    a, b = getattr(live, "__dict__", None), getattr(back, "__dict__", None)
    if not isinstance(a, dict) or not isinstance(b, dict):
        return ""
    if a.keys() != b.keys():
        return "restores with attributes %s instead of %s" % (sorted(b)[:10], sorted(a)[:10])
    for k, v in a.items():
        # Only atoms: other attributes may compare by identity (a restored sub-object is a new one).
        if type(v) not in _ATOMS or type(b[k]) not in _ATOMS:
            continue
        if v != b[k] and _self_equal(v):
            return "attribute %r restores as another value (its __reduce__/__getstate__ does not save it)" % k
    return ""


# Libraries whose unpickling has effects in the live kernel (a matplotlib figure registers itself with
# pyplot) or whose objects are IPython's: not verified.
_NO_VERIFY = frozenset(("matplotlib", "IPython", "ipykernel", "ipywidgets"))


def _comparable(t):
    if t in _ATOMS or t in (list, dict, tuple, set, frozenset) or issubclass(t, _NO_ALIAS):
        return False
    return t.__eq__ is not object.__eq__ or _custom_pickling(t)


def _custom_pickling(t):
    for k in t.__mro__[:-1]:
        d = vars(k)
        if "__reduce__" in d or "__reduce_ex__" in d or "__getstate__" in d:
            return True
    return False


def _self_equal(v):
    try:
        return (v == v) is True
    except Exception:
        return False
