"""Interpreter state that is not a variable: the global random generators (a notebook seeds once and
draws in later cells), the libraries' settings (libstate.py: rcParams, pandas options, log levels,
...), magics and extensions of the session. Each is one
"state" group named "@...", captured at every snapshot (small: unchanged state reuses its last
pickle and writes nothing). On restore the libraries' settings are applied before the data groups
(restore.py), the rest after them."""

import importlib
import sys
import types

from . import fingerprint, history, libstate
from .common import _reason



def _capture_state(shell, skipped):
    """[(name, value)] of the state to save; what cannot be saved goes to skipped with a reason."""
    out = []
    rnd = sys.modules.get("random")
    if rnd is not None:
        out.append(("@random", rnd.getstate()))
    np = sys.modules.get("numpy")
    if np is not None and hasattr(np, "random") and hasattr(np.random, "get_state"):
        out.append(("@numpy.random", np.random.get_state()))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        out.append(("@torch.random", bytes(torch.get_rng_state().numpy().tobytes())))
    mm = getattr(shell, "magics_manager", None)
    magics = []
    for kind in ("line", "cell"):
        for name, fn in sorted((getattr(mm, "magics", None) or {}).get(kind, {}).items()):
            if isinstance(fn, types.FunctionType) and fn.__module__ == "__main__":
                magics.append((kind, name, fn))
            elif isinstance(fn, types.MethodType) and type(fn.__self__).__module__ == "__main__":
                n = ("%%" if kind == "cell" else "%") + name
                skipped[n] = {"name": n, "type": "magic", "reason": "a magic of a Magics class defined in the "
                              "session is not saved: run its register_magics again after a restore"}
    if magics:
        out.append(("@magics", magics))
    out.extend(libstate.capture(skipped))
    em = getattr(shell, "extension_manager", None)
    loaded = tuple(sorted(getattr(em, "loaded", None) or ()))
    if loaded:  # %load_ext: their magics and hooks come back by loading them again
        out.append(("@extensions", loaded))  # a tuple of names: its last pickle is reused (snapshot._same)
    return out


def _apply_state(shell, name, value):
    """Puts one saved state back (the inverse of _capture_state)."""
    if name == "@random":
        importlib.import_module("random").setstate(value)
    elif name == "@numpy.random":
        importlib.import_module("numpy").random.set_state(value)
    elif name == "@torch.random":
        torch = importlib.import_module("torch")
        torch.set_rng_state(torch.tensor(list(value), dtype=torch.uint8))
    elif name in libstate.BY_NAME:
        setting = libstate.BY_NAME[name]
        importlib.import_module(setting.module)  # the checkpoint had it imported
        setting.apply(value)
    elif name == "@magics":
        for kind, magic, fn in value:
            shell.register_magic_function(fn, kind, magic)
    elif name.startswith((history.PREFIX, history.RNG_PREFIX)):
        history.apply(shell.user_ns["__carryover__"], name, value)
    elif name.startswith(fingerprint.PREFIX):
        fingerprint.apply(shell.user_ns["__carryover__"], name, value)
    elif name == "@extensions":
        bad = []
        for ext in value:
            try:
                if shell.extension_manager.load_extension(ext) not in (None, "already loaded"):
                    bad.append(ext)
            except Exception as e:
                bad.append("%s (%s)" % (ext, _reason(e)))
        if bad:
            raise ValueError("extensions not loaded again: " + ", ".join(bad))
    else:
        raise ValueError("unknown state %s" % name)
