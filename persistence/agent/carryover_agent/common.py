"""Constants and small helpers every part of the agent uses (hashing, timing, error text, the types
that never make two variables share a group)."""

import enum
import hashlib
import os
import pickle
import re
import sys
import time
import types

try:
    import xxhash

    _xxh3 = xxhash.xxh3_128_hexdigest
except Exception:  # pragma: no cover - Debian ships python3-xxhash
    _xxh3 = None
try:
    import zstandard
except Exception:  # pragma: no cover
    zstandard = None
try:
    import dill
except Exception:  # pragma: no cover
    dill = None

PROTOCOL = 5
DEFAULT_CHUNK = 4 << 20
SMALL_GROUP = 64 << 10  # groups smaller than this are re-pickled every turn
RECHECK_BUDGET = 0.004  # seconds spent per snapshot re-checking small groups
INLINE_MAX = 16 << 10  # chunks up to this size travel inline (base64) instead of as spool files
BIG_BYTES = 1 << 20  # top-level bytes/bytearray at least this large go out-of-band
BIG_GRAPH = 4 << 20  # in-band pickle above this: aliasing ids from the values and their direct children
SAMPLE = 64 << 10  # compressibility probe of a buffer chunk

# Names IPython owns (never saved). _N and _iN are matched by _IPY_RE.
_IPY_NAMES = frozenset(
    "In Out _ __ ___ _oh _ih _dh _i _ii _iii exit quit get_ipython __builtins__ __name__ __doc__ "
    "__package__ __loader__ __spec__ __builtin__ __carryover__".split()
)
_IPY_RE = re.compile(r"^_i?\d+$")
# Calls that make a cell's effects invisible to the AST: the snapshot then re-checks every group.
_DYNAMIC_CALLS = frozenset("exec eval globals vars locals __import__ execfile runfile".split())
_DYNAMIC_MAGICS = frozenset("run load store reset reset_selective recall rerun macro aimport autoreload".split())
# Types whose identity does not matter for aliasing (immutable or pickled by reference).
_NO_ALIAS = (str, bytes, int, float, complex, bool, tuple, frozenset, type(None), range, slice, type,
             types.FunctionType, types.BuiltinFunctionType, types.ModuleType, pickle.PickleBuffer,
             types.MethodType, types.CodeType)


def _shared_types():
    """Library objects shared by unrelated values (dtype singletons, enum members, bare object()
    sentinels): they must not glue unrelated variables into one group."""
    out = [enum.Enum]
    np = sys.modules.get("numpy")
    if np is not None:
        out.append(np.dtype)
    return _NO_ALIAS + tuple(out)


def _hash(buf):
    if _xxh3 is not None:
        return _xxh3(buf)
    return hashlib.blake2b(buf, digest_size=16).hexdigest()  # pragma: no cover


class JSONText(str):
    """A str whose repr is itself: the text/plain of a user expression is then raw JSON."""

    def __repr__(self):
        return str(self)


def _ms(t0):
    return round((time.perf_counter() - t0) * 1000, 3)


def _typename(v):
    return type(v).__name__

_ATOMS = frozenset((str, bytes, int, float, bool, type(None)))




def _cwd():
    try:
        return os.getcwd()
    except OSError:
        return ""


def _reason(e):
    s = str(e) or type(e).__name__
    return s if len(s) <= 300 else s[:297] + "..."
