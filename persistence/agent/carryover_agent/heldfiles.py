"""Open files that the values a checkpoint cannot save still hold.

A generator (or an object with a lock, a socket, ...) is skipped by the checkpoint, but the files
it writes through are workspace files the checkpoint does keep. Their last writes may still sit in
the file object's buffer: the workspace would be saved without them, and a restore would bring
back neither the skipped value nor those bytes. So before the workspace is read, the files such
values reach are flushed, as closing them would. A flush that fails (a full disk) is named in the
value's skipped reason."""

import gc
import io
import os
import stat
import types

from .common import _reason

# what the walk does not enter: code and namespaces reach the whole program, not a value's own parts
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType,
           types.MethodType, str, bytes, bytearray, int, float, complex, bool)
_SIZED = (list, tuple, dict, set, frozenset)
_DEPTH = 4  # a generator's frame -> its locals -> a holder -> its list of files
_BUDGET = 5000  # objects walked per checkpoint, in all (measured: one skipped generator 0.01 ms; 20 over a
# 1M-item list, 200,000 records and a frame 0.16 ms)


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
            elif not isinstance(o, _OPAQUE) and not (isinstance(o, _SIZED) and len(o) > left[0]):
                nxt.extend(gc.get_referents(o))  # (a container larger than the budget is not listed)
        level = nxt
    return failed


def _flush(f):
    """Flushes f if it is an open writable regular file: a pipe or a socket could block the checkpoint
    (its reader gone) and is no workspace file; (name, reason) when the flush failed."""
    try:
        if f.closed or not f.writable() or not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        f.flush()
    except (OSError, ValueError, io.UnsupportedOperation) as e:
        if isinstance(e, io.UnsupportedOperation):  # no descriptor (an in-memory stream)
            return None
        return (getattr(f, "name", "?"), _reason(e))
    return None
