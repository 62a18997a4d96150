"""Open files that the values a checkpoint cannot save still hold.

A generator (or an object with a lock, a socket, ...) is skipped by the checkpoint, but the files
it writes through are workspace files the checkpoint does keep. Their last writes may still sit in
the file object's buffer: the workspace would be saved without them, and a restore would bring
back neither the skipped value nor those bytes. So before the workspace is read, the files such
values reach are flushed, as closing them would. A flush that fails (a full disk) is named in the
value's skipped reason."""

import gc
import io
import types

from .common import _reason

# what the walk does not enter: code and namespaces reach the whole program, not a value's own parts
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType,
           types.MethodType, str, bytes, bytearray, int, float, complex, bool)
_DEPTH = 4  # a generator's frame -> its locals -> a holder -> its list of files
_BUDGET = 5000  # objects walked per checkpoint, in all: the walk costs well under a millisecond


_NOTE = "; its open file "


def flush_held(cur, skipped):
    """Flushes the open writable files the skipped values of namespace cur reach (within _DEPTH
    references and _BUDGET objects); a failed flush is added to the value's reason."""
    seen = set()
    left = [_BUDGET]
    for n in sorted(skipped):
        if n in cur:
            err = _walk(cur[n], seen, left)
            if err:  # (a reason carried over from the last turn already has its own note: replaced)
                base = skipped[n].get("reason", "").split(_NOTE)[0]
                skipped[n] = dict(skipped[n], reason="%s%s%s could not be written: %s" % (base, _NOTE, err[0], err[1]))


def _walk(root, seen, left):
    """Flushes the writable files reachable from root; (name, reason) of the first that failed."""
    failed = None
    level = [root]
    for _ in range(_DEPTH + 1):
        nxt = []
        for o in level:
            if id(o) in seen or left[0] <= 0:
                continue
            seen.add(id(o))
            left[0] -= 1
            if isinstance(o, io.IOBase):
                failed = _flush(o) or failed
            elif not isinstance(o, _OPAQUE):
                nxt.extend(gc.get_referents(o))
        level = nxt
    return failed


def _flush(f):
    try:
        if not f.closed and f.writable():
            f.flush()
    except (OSError, ValueError) as e:
        return (getattr(f, "name", "?"), _reason(e))
    return None
