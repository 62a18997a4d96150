"""Reducers: how the agent pickles what pickle's defaults get wrong or cannot do (large bytes
out-of-band, open and closed files, locks, numpy views/dtypes/memmaps, torch tensors and generators).

The rebuild functions here are referenced BY NAME from every checkpoint's pickles as
``carryover_agent.<name>`` (the agent was one module before it was a package): __init__ re-exports
them and sets their __module__ back to "carryover_agent", so old checkpoints load and new pickles keep
the same bytes (an unchanged value still hashes to a chunk the store has)."""

import _thread
import copyreg
import importlib
import io
import os
import pickle
import sys

from . import owners
from .common import PROTOCOL
from .containers.objarrays import reduce_object_array

class _OOBBytes:
    """Wraps a large top-level bytes/bytearray so it goes out-of-band (pickle keeps bytes in-band)."""

    __slots__ = ("b",)

    def __init__(self, b):
        self.b = b

    def __reduce_ex__(self, proto):
        return (_bytes_from, (pickle.PickleBuffer(self.b), type(self.b) is bytearray))


def _bytes_from(buf, is_bytearray):
    return bytearray(buf) if is_bytearray else bytes(buf)


_FILE_TYPES = (io.TextIOWrapper, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.FileIO)


def _reduce_file(f):
    """An open file is saved as path, mode and position and reopened there on restore; a closed one
    only needs its name and mode. Either comes back with the name and mode it had (a relative name
    stays relative; a file opened "w" is not reported as "r+")."""
    name = getattr(f, "name", None)
    if not isinstance(name, str):
        raise pickle.PicklingError("file object has no path")
    if name.startswith("<"):
        raise pickle.PicklingError("stream %s is not a file on disk" % name)
    path = os.path.abspath(name)
    closed = f.closed
    if not closed and not os.path.exists(path):
        raise pickle.PicklingError("file %s no longer exists" % path)
    pos = 0
    if not closed:
        if f.writable():
            f.flush()
        try:
            pos = f.tell()
        except OSError as e:
            raise pickle.PicklingError("cannot tell position: %s" % e)
    enc = getattr(f, "encoding", None) if isinstance(f, io.TextIOWrapper) else None
    errors = getattr(f, "errors", None) if isinstance(f, io.TextIOWrapper) else None
    raw = isinstance(f, io.FileIO)
    return (_reopen_file, (path, f.mode, pos, closed, enc, errors, raw, name))


def _reopen_file(path, mode, pos, closed, encoding, errors, raw, name=None):
    """Reopens a saved file object. The descriptor is opened by hand without O_TRUNC/O_EXCL (reopening
    "w" must not empty the file) and wrapped with the ORIGINAL mode, so type, mode and name are the
    original's. A closed file wraps /dev/null and is closed at once: its file need not exist."""
    if closed:
        fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    else:
        if not os.path.exists(path):
            raise FileNotFoundError("file %s no longer exists" % path)
        if "+" in mode:
            flags = os.O_RDWR
        elif any(c in mode for c in "wxa"):
            flags = os.O_WRONLY
        else:
            flags = os.O_RDONLY
        if "a" in mode:
            flags |= os.O_APPEND
        fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        if "b" in mode or raw:
            f = open(fd, mode if "b" in mode else mode + "b", buffering=0 if raw else -1)
        else:
            f = open(fd, mode, encoding=encoding, errors=errors)
    except BaseException:
        os.close(fd)
        raise
    inner = f
    while hasattr(inner, "buffer") or hasattr(inner, "raw"):
        inner = getattr(inner, "buffer", None) or getattr(inner, "raw")
    try:
        inner.name = name if name is not None else path
    except (AttributeError, TypeError):
        pass
    if closed:
        f.close()
    elif "a" not in mode:
        f.seek(pos)
    return f


_DISPATCH = dict(copyreg.dispatch_table)
for _t in _FILE_TYPES:
    _DISPATCH[_t] = _reduce_file
# Locks come back new and released (dill would restore an RLock as held by a thread that is gone).
_DISPATCH[type(_thread.allocate_lock())] = lambda lock: (_thread.allocate_lock, ())
_DISPATCH[_thread.RLock] = lambda lock: (_thread.RLock, ())


# ---------------------------------------------------------------------------------------------------
# Library reducers: where a library's own pickling silently restores something different (a dtype
# that is equal but not identical, a view that becomes a copy, a tensor that loses its .grad or its
# autograd graph), the agent pickles it itself, or refuses with a reason so the name is reported.

# Arrays and tensors met while pickling: for groups too big to keep the pickler memo, their ids are
# what the agent knows of the group's sharing (a model's parameters, an array behind a view).
_SEEN = []
# What a reducer saved differently from the live object (it still saves it): named in skipped as
# "saved, but ..." for the variables of the group.
_NOTES = []
_LIB = set()  # modules whose reducers are in _DISPATCH
_DISPATCH_TYPES = {}  # "ndarray"/"tensor" -> the type, once its library is loaded


def _library_dispatch():
    """Adds the reducers of numpy and torch to _DISPATCH once each is imported, and those of the
    library state objects (owners.CARRIED) once theirs is (cheap when done)."""
    np = sys.modules.get("numpy")
    if np is not None and "numpy" not in _LIB:
        _LIB.add("numpy")
        for c in np.typecodes["All"]:
            try:
                _DISPATCH[type(np.dtype(c))] = _reduce_dtype
            except TypeError:
                pass
        _DISPATCH[np.ndarray] = _reduce_ndarray
        _DISPATCH[np.memmap] = _reduce_memmap
        _DISPATCH_TYPES["ndarray"] = np.ndarray
    torch = sys.modules.get("torch")
    if torch is not None and "torch" not in _LIB and hasattr(torch, "Tensor") and hasattr(torch, "nn"):
        _LIB.add("torch")
        _DISPATCH[torch.Tensor] = _reduce_tensor
        _DISPATCH[torch.nn.Parameter] = _reduce_tensor
        _DISPATCH[torch.Generator] = _reduce_torch_generator
        _DISPATCH_TYPES["tensor"] = torch.Tensor
    owners.dispatch(_DISPATCH)  # library state objects by reference, wherever they are


def _reduce_dtype(d):
    """A builtin dtype comes back as numpy's own singleton (np.dtype('<f8') is np.dtype('float64')):
    numpy's reduce makes an equal copy, which some code paths treat as another dtype (copies)."""
    np = sys.modules["numpy"]
    try:
        if d.isbuiltin == 1 and np.dtype(d.str) is d:
            return (np.dtype, (d.str,))
    except TypeError:
        pass
    return d.__reduce__()


def _reduce_ndarray(a):
    """A view is saved as (its root array, offset, shape, strides, dtype) and rebuilt as a view of the
    restored root, so it keeps sharing memory (v.base is big); numpy's own reduce saves a copy."""
    _SEEN.append(a)
    base = a.base
    np = sys.modules["numpy"]
    if base is None and a.dtype.hasobject:
        rv = reduce_object_array(a)
        if rv is not None:
            return rv
    if base is None or not isinstance(base, np.ndarray):
        rv = a.__reduce_ex__(PROTOCOL)
        if getattr(rv[0], "__name__", "") == "_frombuffer" and len(rv) == 2:
            return (_array_from_buffer, rv[1])
        return rv
    root = base
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.c_contiguous or root.dtype.hasobject or a.dtype.hasobject or a.size == 0:
        return a.__reduce_ex__(PROTOCOL)
    at, rat = a.__array_interface__["data"][0], root.__array_interface__["data"][0]
    lo, hi = _bounds(a, at)
    if lo < rat or hi > rat + root.nbytes:
        return a.__reduce_ex__(PROTOCOL)
    off = at - rat
    args = (root, off, a.shape, a.strides, a.dtype, bool(a.flags.writeable))
    return (_make_view, args if type(a) is np.ndarray else args + (type(a),))


def _bounds(a, at):
    """The bytes a non-empty array at address at spans (np.byte_bounds without its two passes over
    __array_interface__: a figure holds 8,000 views, a tenth of its re-pickle went there)."""
    lo = hi = at
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.itemsize


def _array_from_buffer(buf, dtype, shape, order):
    """An array straight over its restored buffer (numpy's _frombuffer reshapes a 1-D view of it,
    so the array would not own its data and views of it would get another base)."""
    np = sys.modules.get("numpy") or importlib.import_module("numpy")
    a = np.ndarray(shape, dtype=dtype, buffer=buf, order=order)
    if isinstance(buf, pickle.PickleBuffer) and memoryview(buf).readonly and a.flags.writeable:
        a.flags.writeable = False
    return a


def _reduce_memmap(a):
    """A np.memmap of a file is reopened on that file ("w+" as "r+": it must not be emptied), so it
    stays a memmap whose writes reach the file; numpy's reduce would restore an in-memory copy. A view
    of one is a view of the reopened map. Copy-on-write maps ("c") are saved as data (their changes
    are not in the file)."""
    _SEEN.append(a)
    mm = getattr(a, "_mmap", None)
    if mm is not None and a.base is mm and a.filename and a.mode in ("r", "r+", "w+"):
        order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
        return (_reopen_memmap, (a.filename, a.dtype, a.mode, a.offset, a.shape, order))
    if isinstance(a.base, sys.modules["numpy"].ndarray):
        return _reduce_ndarray(a)
    if mm is not None and a.base is mm:
        _NOTES.append("np.memmap of %s in mode %r is saved as its data: it comes back as an in-memory array, "
                      "not mapped on the file" % (a.filename, a.mode))
    return a.__reduce_ex__(PROTOCOL)


def _reopen_memmap(filename, dtype, mode, offset, shape, order):
    np = sys.modules.get("numpy") or importlib.import_module("numpy")
    m = np.memmap(filename, dtype=dtype, mode="r+" if mode == "w+" else mode, offset=offset, shape=shape, order=order)
    m.mode = mode
    return m


def _make_view(root, offset, shape, strides, dtype, writeable, subtype=None):
    np = sys.modules["numpy"]
    v = np.ndarray.__new__(subtype or np.ndarray, shape, dtype=dtype, buffer=root, offset=offset, strides=strides)
    if subtype is not None and isinstance(root, np.memmap):  # what memmap's own slicing carries over
        for k in ("_mmap", "filename", "offset", "mode"):
            setattr(v, k, getattr(root, k, None))
    if not writeable and v.flags.writeable:
        v.flags.writeable = False
    return v


def _reduce_tensor(t):
    """A torch tensor keeps its .grad (torch's reduce drops it: opt.step() would then do nothing);
    one inside an autograd graph (a grad_fn) cannot be saved: torch would restore it as a leaf, so
    loss.backward() would run and train nothing. It is refused with a reason instead."""
    _SEEN.append(t)
    fn = t.grad_fn
    if fn is not None:
        raise pickle.PicklingError(
            "torch tensor with grad_fn=%s is part of an autograd graph, which cannot be saved (it would "
            "come back as a leaf and backward() would train nothing): keep t.detach() or t.item(), or "
            "recompute it after a restore" % type(fn).__name__)
    rv = t.__reduce_ex__(PROTOCOL)
    g = t.grad
    if g is None:
        return rv
    return (_tensor_with_grad, (rv[0], rv[1], g))


def _tensor_with_grad(rebuild, args, grad):
    t = rebuild(*args)
    t.grad = grad
    return t


def _reduce_torch_generator(g):
    """torch.Generator does not pickle: saved as its device and state, so it continues its sequence."""
    return (_torch_generator, (str(g.device), bytes(g.get_state().numpy().tobytes())))


def _torch_generator(device, state):
    import torch

    g = torch.Generator(device=device)
    g.set_state(torch.tensor(list(state), dtype=torch.uint8))
    return g
