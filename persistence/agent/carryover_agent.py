"""carryover snapshot agent: lives inside each IPython kernel and turns its namespace into chunks.

Loaded by the Go server (persistence.AgentBootstrap) as the module ``carryover_agent`` and bound in the
user namespace as ``__carryover__`` (the only name it adds). Only stdlib, dill, xxhash and zstandard.

Why it looks like this
----------------------
* Saving the whole namespace after every turn is too slow (a 1 GiB array costs seconds), so the agent
  works out what a turn could have changed: names created, deleted or rebound (dict keys + id()), names the
  turn's cells read or write (their AST), global names used by session functions the cells called
  (co_names, transitively), and every small group (re-pickled each turn within a time budget, which
  catches mutations through aliases the AST cannot see). Everything else reuses its previous reference.
* Variables that share objects form ONE group pickled together (the pickler memo keeps ``b is a``).
* Pickle protocol 5 with the C pickler; contiguous buffers (numpy arrays, large top-level bytes) go
  out-of-band, cut into chunks hashed with xxh3-128, so an unchanged 1 GiB array writes nothing and a
  modified one writes only its changed chunks. dill is the fallback for what pickle cannot do; classes
  and functions defined in the session are pickled by value (classes through a skeleton + state, which
  also works for Enum and ABC), and restored before the data that refers to them as ``__main__.Name``.
* Modules and objects imported from modules are recorded by reference and re-imported.
* What restores differently is restored faithfully or named (checkpoint "skipped"): interpreter state
  that is no variable (global random generators, rcParams, session magics) travels as "state" groups;
  library reducers keep views as views, dtypes as numpy's singletons, tensors' .grad, memmaps on their
  files, and refuse tensors inside an autograd graph; small changed groups are unpickled and compared
  with the live values ("saved, but ..." when a custom __reduce__ loses something).
* Large numpy buffers are diffed by dirty-page tracking (userfaultfd WP_ASYNC + PAGEMAP_SCAN, see
  _Tracker): only chunks with written pages are hashed again; elsewhere every chunk is hashed.

Spool protocol (the Go side is persistence/checkpoint_spool.go)
-------------------------------------------------------------
Go calls, silently, ``__carryover__.call(<op>, <json args>)`` and reads the answer as the text/plain of
the user expression ``__carryover__.take()`` (a str whose repr is the raw JSON).

``snapshot`` args {"token", "committed", "chunk_size"}:
  * ``committed`` is the token of the last snapshot Go committed. The agent keeps the state of its last
    snapshot as *pending* until Go says (in the next call) that it was committed; otherwise it is dropped
    and its cells are analysed again, so a failed commit never leaves the agent believing Go has chunks.
  * New chunks (content Go does not have: not referenced by the committed state) are written as files
    ``<spool>/<token>/<hash>`` holding the STORED bytes (zstd-compressed when that pays), or inlined as
    base64 in the answer when small. Go streams each file into the store and deletes the directory.
  * A group descriptor chunk (JSON, below) names a group's pickle and buffer chunks; the manifest refers
    to a group by that one hash, and the descriptor's chunk entry lists them as children for GC.
  * Answer: {"token", "groups": [{"k": "imp"|"def"|"data"|"state", "n": [names], "t": [types], "r": hash,
    "m": module, "a": attr}], "saved": [names], "unchanged": N, "skipped": [{"name","type","reason"}],
    "chunks": [{"h", "c": "raw"|"zstd", "n": raw len, "s": stored len, "f": file | "d": base64,
    "ch": [children]}], "cwd", "env": {"set": {}, "unset": []}, "timings": {detect_ms, serialize_ms,
    write_ms, dirty_mode: "uffd"|"hash"|"mixed"|"", dirty_fallback, tracked_bytes, rehashed_bytes,
    hashed_bytes}}. "state" groups are named "@random", "@numpy.random", "@torch.random",
    "@matplotlib.rcParams", "@magics", "@extensions": not variables (never in "saved"), restored after the data.
Group descriptor (canonical JSON): {"v": 1, "k": kind, "n": [names], "f": "p" (pickle) | "d" (dill),
  "p": [[hash, len], ...] (the pickle stream), "b": [[readonly, len, [[hash, len], ...]], ...]
  (out-of-band buffers in pickle order), "d": [names of session classes/functions it needs first]}.

``restore`` args {"clear", "groups": [{"k", "n", "r", "m", "a", "desc", "pf" | "pd", "bf": [files]}],
  "cwd", "env", "skipped"} ("skipped": the checkpoint's, so "saved, but ..." entries stay named): Go assembles each group's pickle stream into file ``pf`` (or inlines it as base64 ``pd``)
  and each out-of-band buffer into ONE file of ``bf``; the agent maps buffers copy-on-write (mmap
  ACCESS_COPY: no copy until written), unlinks the files and loads each group independently.
  Answer: {"restored": [names], "failed": [{"name","type","reason"}], "cwd", "timings": {load_ms},
  "groups": [{"n": [names], "ms"}]}.

``preimport`` args {"modules": [names]}: import them in a background thread (warm pool kernels).

``forget``: drop the agent's state so the next snapshot serialises everything again.
"""

import _thread
import abc
import ast
import base64
import copyreg
import enum
import gc
import hashlib
import importlib
import io
import json
import mmap
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


# ---------------------------------------------------------------------------------------------------
# AST analysis: which global names can a cell read or write?


class _CellNames(ast.NodeVisitor):
    """Collects the global names a cell may touch. Names local to functions (args, assignments) are
    excluded unless declared global; names used inside function bodies that are not local are included
    because the function may be called in the same cell."""

    def __init__(self):
        self.names = set()
        self.dynamic = False

    # module scope
    def visit_Name(self, node):
        self.names.add(node.id)

    def visit_Import(self, node):
        for a in node.names:
            self.names.add(a.asname or a.name.split(".")[0])

    def visit_ImportFrom(self, node):
        for a in node.names:
            if a.name == "*":
                self.dynamic = True
            else:
                self.names.add(a.asname or a.name)

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Name) and f.id in _DYNAMIC_CALLS:
            self.dynamic = True
        if isinstance(f, ast.Attribute) and f.attr in ("run_line_magic", "run_cell_magic", "magic"):
            self._magic(node)
        self.generic_visit(node)

    def _magic(self, node):
        args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not args:
            self.dynamic = True
            return
        name = args[0].split()[0].lstrip("%") if args[0].strip() else ""
        if name in _DYNAMIC_MAGICS:
            self.dynamic = True
            return
        for text in args[1:]:
            for piece in (text, " ".join(w for w in text.split() if not w.startswith("-"))):
                try:
                    self.visit(ast.parse(piece))
                    break
                except SyntaxError:
                    continue
            for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
                self.names.add(w)  # e.g. %%capture out, %time x = f(y): overestimating is safe

    def visit_FunctionDef(self, node):
        self.names.add(node.name)
        for d in node.decorator_list:
            self.visit(d)
        self._args_defaults(node.args)
        self._scope(node.args, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self._args_defaults(node.args)
        self._scope(node.args, [node.body])

    def visit_ClassDef(self, node):
        self.names.add(node.name)
        for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(d)
        inner = _CellNames()
        for stmt in node.body:
            inner.visit(stmt)
        local = _stored(node.body)
        self.names |= inner.names - local
        self.dynamic |= inner.dynamic

    def _args_defaults(self, args):
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)

    def _scope(self, args, body):
        inner = _CellNames()
        for stmt in body:
            inner.visit(stmt)
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        if args.vararg:
            params.add(args.vararg.arg)
        if args.kwarg:
            params.add(args.kwarg.arg)
        declared = _declared_global(body)
        local = (_stored(body) | params) - declared
        self.names |= (inner.names - local) | declared
        self.dynamic |= inner.dynamic

    def _comp(self, node):
        inner = _CellNames()
        for g in node.generators:
            inner.visit(g.iter)
            for c in g.ifs:
                inner.visit(c)
        for part in ("elt", "key", "value"):
            if getattr(node, part, None) is not None:
                inner.visit(getattr(node, part))
        targets = set()
        for g in node.generators:
            targets |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.names |= inner.names - targets
        self.dynamic |= inner.dynamic

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp


def _stored(body):
    """Names assigned in a function/class body (its locals), not descending into nested scopes."""
    out = set()
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out.add(a.asname or a.name.split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _declared_global(body):
    out = set()
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Global):
                out.update(n.names)
    return out


def _code_names(code, seen):
    """co_names of a code object and the code objects nested in it: the globals a function may use."""
    out = set()
    stack = [code]
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


# ---------------------------------------------------------------------------------------------------
# Pickling helpers


def _is_session_def(v):
    return isinstance(v, (types.FunctionType, type)) and getattr(v, "__module__", None) == "__main__"


def _import_ref(v):
    """(module, attr) when v can be re-imported: modules, and classes/functions of real modules."""
    if isinstance(v, types.ModuleType):
        name = getattr(v, "__name__", None)
        if name and sys.modules.get(name) is v and name != "__main__":
            return (name, None)
        return None
    if not isinstance(v, (type, types.FunctionType, types.BuiltinFunctionType)):
        return None
    mod = getattr(v, "__module__", None)
    qual = getattr(v, "__qualname__", None)
    if not mod or not qual or mod == "__main__" or "<" in qual:
        return None
    m = sys.modules.get(mod)
    if m is None:
        return None
    obj = m
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    return (mod, qual) if obj is v else None


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
    """Adds the reducers of numpy and torch to _DISPATCH once each is imported (cheap when done)."""
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
    if base is None or not isinstance(base, np.ndarray):
        rv = a.__reduce_ex__(PROTOCOL)
        if getattr(rv[0], "__name__", "") == "_frombuffer" and len(rv) == 2:
            return (_array_from_buffer, rv[1])
        return rv
    root = base
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.c_contiguous or root.dtype.hasobject or a.dtype.hasobject:
        return a.__reduce_ex__(PROTOCOL)
    lo, hi = np.byte_bounds(a)
    rlo, rhi = np.byte_bounds(root)
    if lo < rlo or hi > rhi:
        return a.__reduce_ex__(PROTOCOL)
    off = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    args = (root, off, a.shape, a.strides, a.dtype, bool(a.flags.writeable))
    return (_make_view, args if type(a) is np.ndarray else args + (type(a),))


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


class _DataPickler(pickle.Pickler):
    """The C pickler, protocol 5; open files through _reduce_file."""

    dispatch_table = _DISPATCH


# Module-level singletons that must keep their identity (dataclasses compares Field._field_type with
# `is`): pickled as references to their module attribute.
def _sentinels():
    out = {}
    for modname in ("dataclasses", "enum", "typing", "abc", "functools"):
        m = sys.modules.get(modname)
        if m is None:
            continue
        for k, v in vars(m).items():
            if isinstance(v, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, int,
                              str, float, bytes, tuple, type(None), bool)):
                continue
            out[id(v)] = (modname, k, v)
    return out


_ENUM_INTERNAL = frozenset(
    "_member_names_ _member_map_ _value2member_map_ _unhashable_values_ _member_type_ _value_repr_ "
    "_new_member_ _use_args_ _singles_mask_ _boundary_ _flag_mask_ _all_bits_ _inverted_ __new_member__ "
    "_generate_next_value_ __dict__ __weakref__ _missing_".split()
)


def _class_state(cls):
    d = dict(cls.__dict__)
    # __slotnames__ is copyreg's cache (appears once an instance was pickled): not part of the class.
    for k in ("__dict__", "__weakref__", "_abc_impl", "__abstractmethods__", "__module__", "__qualname__",
              "__slotnames__"):
        d.pop(k, None)
    slots = d.get("__slots__", ())
    if isinstance(slots, str):
        slots = (slots,)
    for s in slots:
        if isinstance(d.get(s), types.MemberDescriptorType):
            d.pop(s)
    return d, tuple(slots)


def _reduce_class(cls):
    """A session class by value: a skeleton first (memoised, so methods referring to the class -
    super() cells, class attributes - resolve to it), then its attributes through a state setter."""
    meta = type(cls)
    state, slots = _class_state(cls)
    if isinstance(cls, enum.EnumMeta):
        members = [(k, m._value_) for k, m in cls._member_map_.items()]
        for k in list(state):
            if k in cls._member_map_ or k in _ENUM_INTERNAL:
                state.pop(k)
        if state.get("__new__") is enum.Enum.__new__:
            state.pop("__new__")
        skel = (_enum_skeleton, (meta, cls.__name__, cls.__qualname__, cls.__bases__, members))
    else:
        state.pop("__slots__", None)
        skel = (_class_skeleton, (meta, cls.__name__, cls.__qualname__, cls.__bases__, slots))
    # Sorted: a restored class gets its attributes in another order, and must pickle to the same bytes.
    state = dict(sorted(state.items()))
    return skel + (state, None, None, _class_setstate)


def _class_skeleton(meta, name, qualname, bases, slots):
    ns = {"__module__": "__main__", "__qualname__": qualname}
    if slots:
        ns["__slots__"] = slots
    return types.new_class(name, bases, {"metaclass": meta}, lambda d: d.update(ns))


def _enum_skeleton(meta, name, qualname, bases, members):
    d = meta.__prepare__(name, bases)
    d["__module__"] = "__main__"
    d["__qualname__"] = qualname
    for k, v in members:
        d[k] = v
    return meta(name, bases, d)


def _class_setstate(cls, state):
    for k, v in state.items():
        if k in ("__doc__",) and v is None:
            continue
        try:
            setattr(cls, k, v)
        except (AttributeError, TypeError):
            pass
    if isinstance(cls, abc.ABCMeta) and hasattr(abc, "update_abstractmethods"):
        abc.update_abstractmethods(cls)
    return cls


if dill is not None:

    class _DillPickler(dill.Pickler):
        """dill with session classes by value (skeleton + state) and other session definitions by
        reference to their name, so each keeps its identity and restores in dependency order."""

        dispatch_table = _DISPATCH

        def __init__(self, file, agent, root, **kw):
            super().__init__(file, protocol=PROTOCOL, **kw)
            self._agent = agent
            self._root = root
            self.deps = set()
            self._strs = {}

        def save(self, obj, save_persistent_id=True):
            # Equal strings are written once whatever their identity: a restored class or function holds
            # copies where the original shared interned strings, and must still pickle to the same bytes.
            t = type(obj)
            if t is str or t is bytes:
                obj = self._strs.setdefault((t, obj), obj)
            elif t is tuple and obj and all(type(e) in _ATOMS for e in obj):
                key = tuple((type(e), e.hex() if type(e) is float else e) for e in obj)  # -0.0 != 0.0
                obj = self._strs.setdefault((t, key), obj)
            return super().save(obj, save_persistent_id)

        def persistent_id(self, obj):
            if obj is self._root:
                return None
            oid = id(obj)
            name = self._agent._defnames.get(oid)
            if name is not None:
                self.deps.add(name)
                return ("d", name)
            s = self._agent._sentinels.get(oid)
            if s is not None and s[2] is obj:
                return ("g", s[0], s[1])
            if isinstance(obj, types.ModuleType) and _import_ref(obj):
                return ("m", obj.__name__)
            return None

        def reducer_override(self, obj):
            if isinstance(obj, type) and obj.__module__ == "__main__":
                return _reduce_class(obj)
            reduce = _DISPATCH.get(type(obj))
            if reduce is not None and type(obj) not in copyreg.dispatch_table:
                return reduce(obj)
            return NotImplemented


_ATOMS = frozenset((str, bytes, int, float, bool, type(None)))
# Restore order of group kinds: state last (magics name session functions, the numpy generator needs numpy).
_KIND_ORDER = {"imp": 0, "def": 1, "data": 2, "state": 3}


def _persistent_load(ns):
    def load(pid):
        kind = pid[0]
        if kind == "d":
            try:
                return ns[pid[1]]
            except KeyError:
                raise _MissingDep(pid[1])
        if kind == "g":
            return getattr(importlib.import_module(pid[1]), pid[2])
        if kind == "m":
            return importlib.import_module(pid[1])
        raise pickle.UnpicklingError("unknown persistent id %r" % (pid,))

    return load


class _MissingDep(Exception):
    pass


# ---------------------------------------------------------------------------------------------------
# Groups and state


class _Group:
    """One unit of saving: names sharing objects (or one session definition under several names)."""

    __slots__ = ("names", "kind", "ref", "size", "ids", "chunks", "types", "mod", "attr", "warn")

    def __init__(self, names, kind):
        self.names = tuple(names)
        self.kind = kind
        self.ref = ""
        self.size = 0
        self.ids = frozenset()
        self.chunks = ()
        self.types = ()
        self.mod = None
        self.attr = None
        self.warn = None  # _verify's findings: None = not verified, () = restores as itself

    def entry(self):
        e = {"k": self.kind, "n": list(self.names), "t": list(self.types)}
        if self.kind == "imp":
            e["m"] = self.mod
            if self.attr:
                e["a"] = self.attr
        else:
            e["r"] = self.ref
        return e


class _State:
    def __init__(self):
        self.groups = {}  # frozenset(names) -> _Group
        self.ids = {}  # name -> id(value) at the snapshot
        self.skipped = {}  # name -> skip entry (kept while the value is not rebound)
        self.known = set()  # chunk hashes Go has for sure (referenced by this state)
        self.full = True  # a fresh agent checks everything once
        self.recheck_all = False  # after a restore: every small group once, whatever the budget

    def name2group(self):
        return {n: g for g in self.groups.values() for n in g.names}


class _Pickled:
    __slots__ = ("names", "kind", "fmt", "data", "buffers", "ids", "deps", "keep", "notes")

    def __init__(self, names, kind):
        self.names = tuple(names)
        self.kind = kind
        self.fmt = "p"
        self.data = b""
        self.buffers = []
        self.ids = frozenset()
        self.deps = ()
        self.keep = None  # memo copy held while groups are formed, so ids are not reused
        self.notes = ()  # what the reducers saved differently from the live object (_NOTES)


class Agent:
    def __init__(self, shell, spool_dir):
        self.shell = shell
        self.ns = shell.user_ns
        self.spool = spool_dir
        self.spool_host = spool_dir
        self.cells = []
        self.state = _State()
        self.pending = None  # (token, state, cells)
        self._defnames = {}
        self._sentinels = _sentinels()
        self._recheck_pos = 0
        self._result = None
        self._shared = _NO_ALIAS
        self._env0 = dict(os.environ)
        self._warned = {}
        self._tracker = _Tracker()
        self._preimport = None

    # --- wiring ------------------------------------------------------------------------------------
    def pre_run_cell(self, info):
        raw = getattr(info, "raw_cell", None)
        if raw:
            self.cells.append(raw)

    def call(self, op, args="{}"):
        """Runs op with JSON args; the JSON answer is fetched with take() (see module doc)."""
        a = json.loads(args) if isinstance(args, str) else (args or {})
        # The cyclic GC would run over the whole heap again and again while pickling builds millions of
        # objects (memo copies, unpickled containers): 5x slower on a dict of 1M dicts.
        enabled = gc.isenabled()
        gc.disable()
        try:
            out = getattr(self, "op_" + op)(a)
        finally:
            if enabled:
                gc.enable()
        self._result = JSONText(json.dumps(out, separators=(",", ":")))
        return None

    def take(self):
        r, self._result = self._result, None
        return r if r is not None else JSONText("null")

    def op_ping(self, a):
        return {"ok": True, "pid": os.getpid(), "spool": self.spool, "spool_host": self.spool_host, "xxhash": _xxh3 is not None, "zstd": zstandard is not None,
                "dill": dill is not None}

    def op_preimport(self, a):
        """Imports modules (into sys.modules only, not the namespace) in a background thread, so a
        pooled kernel has them loaded when a session claims it: a wake then costs the data, not the
        imports. Modules that are not installed are ignored. Snapshots and restores wait for it."""
        import threading

        mods = [m for m in a.get("modules") or () if isinstance(m, str) and m]

        def work():
            for m in mods:
                try:
                    importlib.import_module(m)
                except Exception:
                    pass

        self._preimport = threading.Thread(target=work, name="carryover-preimport", daemon=True)
        self._preimport.start()
        return {"ok": True, "modules": mods}

    def _await_preimport(self):
        t, self._preimport = self._preimport, None
        if t is not None:
            t.join()  # never look at a half-imported module

    def op_forget(self, a):
        self.state = _State()
        self.pending = None
        return {"ok": True}

    # --- namespace ---------------------------------------------------------------------------------
    def _keep(self, name, value):
        if name in _IPY_NAMES or _IPY_RE.match(name):
            return False
        hidden = self.shell.user_ns_hidden
        if name in hidden and hidden[name] is value:
            return False
        return not (name.startswith("__") and name.endswith("__"))

    def _user_names(self):
        return {k: v for k, v in self.ns.items() if self._keep(k, v)}

    def _settle(self, committed):
        if self.pending is None:
            return
        token, st, cells = self.pending
        self.pending = None
        if committed and token == committed:
            self.state = st
        else:
            self.cells = cells + self.cells

    def _analyze(self, cells, cur):
        names = set()
        dynamic = False
        for raw in cells:
            try:
                src = self.shell.transform_cell(raw)
                tree = ast.parse(src)
            except Exception:
                try:
                    tree = ast.parse(raw)
                except Exception:
                    dynamic = True
                    continue
            v = _CellNames()
            v.visit(tree)
            names |= v.names
            dynamic |= v.dynamic
        # Globals used by session functions the cells called (or methods of session objects they touched).
        seen_code = set()
        seen = set()
        todo = [n for n in names if n in cur]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            more = set()
            for code in _codes_of(cur.get(n)):
                more |= _code_names(code, seen_code)
            names |= more
            todo.extend(m for m in more if m in cur and m not in seen)
        return names, dynamic

    # --- snapshot ----------------------------------------------------------------------------------
    def op_snapshot(self, a):
        self._await_preimport()
        t0 = time.perf_counter()
        self._tracker.reset_stats()
        self._tracker.purge()
        self._settle(a.get("committed") or "")
        token = a["token"]
        cs = int(a.get("chunk_size") or DEFAULT_CHUNK)
        cells, self.cells = self.cells, []
        prev = self.state
        cur = self._user_names()
        self._defnames = {id(v): k for k, v in cur.items() if _is_session_def(v) and getattr(v, "__qualname__", "") == k}
        for k, v in cur.items():
            if _is_session_def(v) and id(v) not in self._defnames:
                self._defnames[id(v)] = k
        self._shared = _shared_types()
        _library_dispatch()
        touched, dynamic = self._analyze(cells, cur)
        p2g = prev.name2group()
        cand = set()
        for n, v in cur.items():
            if prev.ids.get(n) != id(v):
                cand.add(n)
        if dynamic or prev.full:
            cand |= set(cur)
        cand |= touched & cur.keys()
        gone = prev.ids.keys() - cur.keys()
        for n in cand | gone:
            g = p2g.get(n)
            if g is not None:
                cand |= {m for m in g.names if m in cur}
        detect = time.perf_counter() - t0

        t1 = time.perf_counter()
        new_groups = {}
        skipped = {}
        results = []  # _Pickled ready to chunk
        # imports and session definitions
        data_names = []
        by_def = {}
        for n in sorted(cand):
            v = cur[n]
            ref = _import_ref(v)
            if ref is not None:
                g = _Group([n], "imp")
                g.mod, g.attr = ref
                g.types = (_typename(v),)
                new_groups[frozenset(g.names)] = g
            elif _is_session_def(v):
                by_def.setdefault(id(v), []).append(n)
            else:
                data_names.append(n)
        for ns_ in by_def.values():
            full = sorted(k for k, v in cur.items() if v is cur[ns_[0]])
            pk = self._pickle_def(full, cur[ns_[0]], skipped)
            if pk is not None:
                results.append(pk)
        results.extend(self._pickle_data(data_names, cur, prev, p2g, skipped))
        # Small unchanged groups: re-pickle within a budget (mutations through aliases).
        picked = {n for r in results for n in r.names} | set(skipped)
        results.extend(self._recheck(prev, cur, picked, skipped, t1))
        results.extend(self._pickle_state(skipped))
        serialize = time.perf_counter() - t1

        # chunk, hash, write
        t2 = time.perf_counter()
        hash_t = 0.0
        chunks_out = []
        emitted = set()
        known = prev.known
        saved = []
        outdir = os.path.join(self.spool, token)
        made_dir = [False]
        for r in results:
            th = time.perf_counter()
            g, pieces = self._describe(r, cs, cur)
            hash_t += time.perf_counter() - th
            old = prev.groups.get(frozenset(g.names))
            if g.kind == "data":
                g.warn = old.warn if old is not None and old.ref == g.ref and old.warn is not None else _verify(r, cur)
                if r.notes:
                    g.warn = tuple(g.warn) + tuple({"name": n, "type": _typename(cur[n]), "reason": "saved, but " + "; ".join(r.notes)}
                                                   for n in r.names if n not in {w["name"] for w in g.warn})
                if old is not None and old.warn:  # a value restored degraded compares equal to itself now
                    seen = {w["name"] for w in g.warn}
                    g.warn = tuple(g.warn) + tuple(w for w in old.warn if w["name"] not in seen and w["name"] in cur
                                                   and prev.ids.get(w["name"]) == id(cur[w["name"]]))
            if old is not None and old.ref == g.ref:
                g.size = old.size if not g.size else g.size
            elif g.kind != "state":
                saved.extend(g.names)
            new_groups[frozenset(g.names)] = g
            for h, piece, children in pieces:
                if h in known or h in emitted:
                    continue
                emitted.add(h)
                chunks_out.append(self._emit(outdir, made_dir, h, piece, children))
            r.keep = None
        # reuse every group not re-checked
        done = {n for g in new_groups.values() for n in g.names} | set(skipped)
        for key, g in prev.groups.items():
            if key in new_groups:
                continue
            if all(n in cur and n not in done for n in g.names):
                new_groups[key] = g
                done |= set(g.names)
        for n in cur:
            if n not in done and n in prev.skipped and prev.ids.get(n) == id(cur[n]):
                skipped[n] = prev.skipped[n]
        for g in new_groups.values():  # saved, but they restore as something else: say so every time
            for w in g.warn or ():
                skipped.setdefault(w["name"], w)
        write = time.perf_counter() - t2 - hash_t
        serialize += hash_t

        st = _State()
        st.full = False
        st.groups = new_groups
        st.ids = {n: id(v) for n, v in cur.items()}
        st.skipped = skipped
        for g in new_groups.values():
            if g.ref:
                st.known.add(g.ref)
                st.known.update(g.chunks)
        self.pending = (token, st, cells)
        saved_set = set(saved) | {n for k, g in new_groups.items() if g.kind == "imp" and k not in prev.groups for n in g.names}
        nsaved = sum(len(g.names) for g in new_groups.values() if g.kind != "state")
        groups = sorted(new_groups.values(), key=lambda g: (_KIND_ORDER[g.kind], g.names))
        return {
            "token": token,
            "spool_host": self.spool_host,
            "groups": [g.entry() for g in groups],
            "saved": sorted(saved_set),
            "unchanged": nsaved - len(saved_set),
            "skipped": [skipped[n] for n in sorted(skipped)],
            "chunks": chunks_out,
            "cwd": _cwd(),
            "env": self._env_diff(),
            "timings": dict({"detect_ms": round(detect * 1000, 3), "serialize_ms": round(serialize * 1000, 3),
                             "write_ms": round(write * 1000, 3)}, **self._dirty_timings()),
        }

    def _dirty_timings(self):
        """How large buffers' changes were found: "uffd" (dirty-page scans), "hash" (every chunk hashed,
        with the reason), "mixed", or "" when no buffer was large enough to track."""
        st = self._tracker.stats
        fb = st.get("fallback", "")
        mode = ("mixed" if fb else "uffd") if st.get("tracked") else ("hash" if fb else "")
        out = {"dirty_mode": mode, "tracked_bytes": st.get("tracked", 0), "rehashed_bytes": st.get("rehashed", 0),
               "hashed_bytes": st.get("hashed", 0)}
        if fb:
            out["dirty_fallback"] = fb
        return out

    def _env_diff(self):
        env = os.environ
        out = {"set": {k: v for k, v in env.items() if self._env0.get(k) != v},
               "unset": sorted(k for k in self._env0 if k not in env)}
        return out

    def _pickle_def(self, names, obj, skipped):
        r = _Pickled(names, "def")
        if dill is None:
            for n in names:
                skipped[n] = {"name": n, "type": _typename(obj), "reason": "dill is not installed"}
            return None
        try:
            buf = io.BytesIO()
            bufs = []
            p = _DillPickler(buf, self, obj, buffer_callback=bufs.append)
            p.dump(obj)
            r.fmt, r.data, r.buffers, r.deps = "d", buf.getvalue(), bufs, tuple(sorted(p.deps - set(names)))
            return r
        except Exception as e:
            for n in names:
                skipped[n] = {"name": n, "type": _typename(obj), "reason": _reason(e)}
            return None

    def _pickle_one(self, names, values):
        """Pickles values (one name: the value; several: a tuple) with the C pickler, else dill.
        Returns _Pickled or raises."""
        r = _Pickled(names, "data")
        obj = values[0] if len(values) == 1 else tuple(values)
        if len(values) == 1 and type(obj) in (bytes, bytearray) and len(obj) >= BIG_BYTES:
            obj = _OOBBytes(obj)
        bufs = []
        buf = io.BytesIO()
        del _SEEN[:], _NOTES[:]
        try:
            p = _DataPickler(buf, protocol=PROTOCOL, buffer_callback=bufs.append)
            p.dump(obj)
            r.data = buf.getvalue()
            r.keep = p.memo.copy() if len(r.data) <= BIG_GRAPH else None
        except Exception as first:
            if dill is None:
                raise first
            bufs = []
            buf = io.BytesIO()
            del _SEEN[:], _NOTES[:]
            p = _DillPickler(buf, self, None, buffer_callback=bufs.append)
            try:
                p.dump(obj)
            except Exception as e:
                raise e from first
            r.fmt = "d"
            r.data = buf.getvalue()
            r.keep = dict(p.memo) if len(r.data) <= BIG_GRAPH else None
            r.deps = tuple(sorted(p.deps))
        r.buffers = bufs
        ids = set()
        shared = self._shared
        if r.keep is not None:
            for k, (_, o) in r.keep.items():
                if not isinstance(o, shared) and type(o) is not object and o is not obj:
                    ids.add(k)
        else:
            # A huge object graph: copying the pickler memo costs more than pickling. Sharing is then
            # detected through the values and their direct children only (b = d[5] still groups with d).
            for v in values:
                kids = v.values() if isinstance(v, dict) else v if isinstance(v, (list, set, tuple)) else ()
                ids.update(id(k) for k in kids if not isinstance(k, shared) and type(k) is not object)
            ids.update(id(o) for o in _SEEN)  # arrays and tensors anywhere in the graph
        del _SEEN[:]
        r.notes = tuple(dict.fromkeys(_NOTES))
        del _NOTES[:]
        if len(values) > 1 or obj is values[0]:
            ids.update(id(v) for v in values if not isinstance(v, shared))
        r.ids = frozenset(ids)
        return r

    def _pickle_data(self, names, cur, prev, p2g, skipped):
        """Pickles each candidate alone, merges names whose objects overlap (with each other or with
        groups not re-checked) and re-pickles merged groups together."""
        singles = {}
        todo = list(names)
        while todo:
            n = todo.pop()
            if n in singles or n in skipped:
                continue
            try:
                singles[n] = self._pickle_one([n], [cur[n]])
            except Exception as e:
                skipped[n] = {"name": n, "type": _typename(cur[n]), "reason": _reason(e)}
                continue
            ids = singles[n].ids
            if not ids:
                continue
            # overlap with a group that was not a candidate: pull it in
            for g in prev.groups.values():
                if g.kind == "data" and g.ids and not g.ids.isdisjoint(ids):
                    for m in g.names:
                        if m in cur and m not in singles and m not in skipped and m not in todo:
                            todo.append(m)
        # union-find over shared ids
        parent = {n: n for n in singles}

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        owner = {}
        for n in sorted(singles):
            for i in singles[n].ids:
                o = owner.setdefault(i, n)
                if o != n:
                    parent[find(n)] = find(o)
        comps = {}
        for n in singles:
            comps.setdefault(find(n), []).append(n)
        out = []
        for members in comps.values():
            members.sort()
            if len(members) == 1:
                out.append(singles[members[0]])
                continue
            try:
                out.append(self._pickle_one(members, [cur[m] for m in members]))
            except Exception:
                out.extend(singles[m] for m in members)  # together fails: save apart, lose aliasing
        return out

    def _pickle_state(self, skipped):
        """The interpreter state (_capture_state), one "state" group per item."""
        out = []
        try:
            items = _capture_state(self.shell, skipped)
        except Exception as e:
            skipped["@state"] = {"name": "@state", "type": "state", "reason": _reason(e)}
            return out
        for name, value in items:
            try:
                r = self._pickle_one([name], [value])
            except Exception as e:
                skipped[name] = {"name": name, "type": "state", "reason": _reason(e)}
                continue
            r.kind, r.ids, r.keep = "state", frozenset(), None
            out.append(r)
        return out

    def _recheck(self, prev, cur, picked, skipped, t_start):
        small = [g for g in prev.groups.values() if g.kind in ("data", "def") and g.size < SMALL_GROUP
                 and all(n in cur and n not in picked for n in g.names)]
        if not small:
            return []
        small.sort(key=lambda g: g.names)
        out = []
        start = self._recheck_pos % len(small)
        # Right after a restore every small group is re-checked once: objects rebuilt on load (a
        # DataFrame, a reopened file) may pickle to other bytes, and all such rewrites then land together.
        budget = 3600.0 if prev.recheck_all else RECHECK_BUDGET
        deadline = time.perf_counter() + budget
        i = 0
        for i in range(len(small)):
            if time.perf_counter() > deadline:
                break
            g = small[(start + i) % len(small)]
            try:
                if g.kind == "def":
                    r = self._pickle_def(list(g.names), cur[g.names[0]], skipped)
                    if r is None:
                        continue
                else:
                    r = self._pickle_one(list(g.names), [cur[n] for n in g.names])
            except Exception as e:
                for n in g.names:
                    skipped[n] = {"name": n, "type": _typename(cur[n]), "reason": _reason(e)}
                continue
            out.append(r)
        else:
            i = len(small)
        self._recheck_pos = start + i
        return out

    def _describe(self, r, cs, cur):
        """Cuts a pickled group into hashed chunks and builds its descriptor."""
        pieces = []
        pl = []
        data = memoryview(r.data)
        for off in range(0, max(len(data), 1), cs):
            piece = data[off:off + cs]
            h = _hash(piece)
            pl.append([h, len(piece)])
            pieces.append((h, piece, None))
        bl = []
        size = len(data)
        for pb in r.buffers:
            try:
                mv = pb.raw()
            except BufferError:
                mv = memoryview(bytes(pb))  # non-contiguous: copy once
            ro = 1 if mv.readonly else 0
            cl = self._tracker.hashes(mv, cs)
            for i, (h, _) in enumerate(cl):
                pieces.append((h, mv[i * cs:(i + 1) * cs], None))
            bl.append([ro, len(mv), cl])
            size += len(mv)
        desc = {"v": 1, "k": r.kind, "n": list(r.names), "f": r.fmt, "p": pl, "b": bl, "d": list(r.deps)}
        dj = json.dumps(desc, separators=(",", ":"), sort_keys=True).encode()
        children = sorted({h for h, _, _ in pieces})
        ref = _hash(dj)
        pieces.append((ref, dj, children))
        g = _Group(r.names, r.kind)
        g.ref = ref
        g.size = size
        g.ids = r.ids
        g.chunks = tuple(children)
        g.types = tuple(_typename(cur[n]) if n in cur else "state" for n in r.names)
        return g, pieces

    def _emit(self, outdir, made, h, piece, children):
        raw_len = len(piece)
        codec, stored = "raw", piece
        if zstandard is not None and raw_len >= 256:
            probe = piece if raw_len <= SAMPLE else piece[:SAMPLE]
            c = zstandard.ZstdCompressor(level=1).compress(probe)
            if len(c) < 0.8 * len(probe):
                z = c if raw_len <= SAMPLE else zstandard.ZstdCompressor(level=1).compress(piece)
                if len(z) < raw_len:
                    codec, stored = "zstd", z
        e = {"h": h, "c": codec, "n": raw_len, "s": len(stored)}
        if children:
            e["ch"] = children
        if len(stored) <= INLINE_MAX:
            e["d"] = base64.b64encode(stored).decode()
        else:
            if not made[0]:
                os.makedirs(outdir, exist_ok=True)
                made[0] = True
            with open(os.path.join(outdir, h), "wb") as f:
                f.write(stored)
            e["f"] = h
        return e

    # --- restore -----------------------------------------------------------------------------------
    def op_restore(self, a):
        self._await_preimport()
        t0 = time.perf_counter()
        self.pending = None
        self.cells = []
        if a.get("clear"):
            for k in list(self.ns):
                if self._keep(k, self.ns[k]):
                    del self.ns[k]
        restored, failed, timings = [], [], []
        # What the checkpoint said restores differently ("saved, but ..."): kept on the groups so every
        # later checkpoint still says it (the restored value now compares equal to its own round trip).
        self._warned = {s["name"]: s for s in a.get("skipped") or ()
                        if isinstance(s, dict) and str(s.get("reason", "")).startswith("saved, but")}
        st = _State()
        st.full = False
        groups = a.get("groups") or []
        imps = [g for g in groups if g["k"] == "imp"]
        defs = [g for g in groups if g["k"] == "def"]
        data = [g for g in groups if g["k"] == "data"]
        state = [g for g in groups if g["k"] == "state"]
        load = _persistent_load(self.ns)
        for g in imps:
            try:
                m = importlib.import_module(g["m"])
                obj = m
                if g.get("a"):
                    for part in g["a"].split("."):
                        obj = getattr(obj, part)
                for n in g["n"]:
                    self.ns[n] = obj
                restored.extend(g["n"])
                grp = _Group(g["n"], "imp")
                grp.mod, grp.attr, grp.types = g["m"], g.get("a"), tuple(g.get("t") or ())
                st.groups[frozenset(grp.names)] = grp
            except Exception as e:
                failed.extend({"name": n, "type": "module", "reason": _reason(e)} for n in g["n"])
        # session definitions: dependency order, retried while progress is made
        pending = list(defs)
        while pending:
            progress = False
            later = []
            for g in pending:
                ok = self._load_into(g, load, restored, failed, timings, st, retry=True)
                if ok is None:
                    later.append(g)
                else:
                    progress = True
            if not progress:
                for g in later:
                    self._load_into(g, load, restored, failed, timings, st, retry=False)
                break
            pending = later
        for g in data:
            self._load_into(g, load, restored, failed, timings, st, retry=False)
        for g in state:
            self._load_into(g, load, restored, failed, timings, st, retry=False, apply=self._apply_state)
        cwd = a.get("cwd")
        if cwd and os.path.isdir(cwd):
            os.chdir(cwd)
        env = a.get("env") or {}
        for k, v in (env.get("set") or {}).items():
            os.environ[k] = v
        for k in env.get("unset") or ():
            os.environ.pop(k, None)
        cur = self._user_names()
        st.ids = {n: id(v) for n, v in cur.items()}
        for g in st.groups.values():
            if g.ref:
                st.known.add(g.ref)
                st.known.update(g.chunks)
        st.recheck_all = True
        self.state = st
        return {"restored": sorted(restored), "failed": failed, "cwd": _cwd(),
                "timings": {"load_ms": _ms(t0)}, "groups": timings}

    def _seed(self, objs, bufs, desc):
        """Hands the dirty-page tracker the chunk hashes of large restored buffers (from the group's
        descriptor), keyed to the arrays built straight over them."""
        np = sys.modules.get("numpy")
        if np is None:
            return
        at = {}
        for j, b in enumerate(bufs):
            chunks = desc["b"][j][2] if j < len(desc["b"]) else ()
            if isinstance(b, mmap.mmap) and len(b) >= TRACK_MIN and len(chunks) > 1:
                import ctypes

                at[ctypes.addressof(ctypes.c_char.from_buffer(b))] = (len(b), chunks)
        if not at:
            return
        for o in objs:
            if type(o) is np.ndarray and o.base is not None and not isinstance(o.base, np.ndarray):
                hit = at.get(o.__array_interface__["data"][0])
                if hit and o.nbytes == hit[0] and (o.flags.c_contiguous or o.flags.f_contiguous):
                    self._tracker.seed(o, o.__array_interface__["data"][0], hit[0], hit[1][0][1], hit[1])

    def _apply_state(self, names, obj):
        _apply_state(self.shell, names[0], obj)

    def _load_into(self, g, load, restored, failed, timings, st, retry, apply=None):
        t = time.perf_counter()
        names = g["n"]
        bufs = []
        try:
            desc = g["desc"]
            if "pd" in g:
                data = base64.b64decode(g["pd"])
            else:
                with open(g["pf"], "rb") as f:
                    data = f.read()
            bufs = [_map_file(p) for p in g.get("bf") or ()]
            if desc["f"] == "d":
                u = dill.Unpickler(io.BytesIO(data), buffers=bufs)
                u.persistent_load = load
                obj = u.load()
            else:
                u = pickle.Unpickler(io.BytesIO(data), buffers=bufs)
                u.persistent_load = load
                obj = u.load()
        except _MissingDep as e:
            if retry:
                return None
            reason = "needs %s, which could not be restored" % e.args[0]
            failed.extend({"name": n, "type": (g.get("t") or ["?"] * len(names))[i], "reason": reason}
                          for i, n in enumerate(names))
            _cleanup(g)
            return False
        except Exception as e:
            failed.extend({"name": n, "type": (g.get("t") or ["?"] * len(names))[i], "reason": _reason(e)}
                          for i, n in enumerate(names))
            _cleanup(g)
            return False
        _cleanup(g)
        if apply is not None:
            try:
                apply(names, obj)
            except Exception as e:
                failed.extend({"name": n, "type": "state", "reason": _reason(e)} for n in names)
                return False
        else:
            if g["k"] == "def" or len(names) == 1:
                values = [obj] * len(names)
            else:
                values = list(obj)
            for n, v in zip(names, values):
                self.ns[n] = v
            restored.extend(names)
            objs = _memo_objects(u)
            grp_ids = _loaded_ids(objs, obj, values, desc)
            self._seed(objs, bufs, desc)
        timings.append({"n": names, "ms": _ms(t)})
        grp = _Group(names, g["k"])
        grp.ref = g["r"]
        if apply is None and g["k"] == "data":
            grp.ids = grp_ids
            grp.warn = tuple(self._warned[n] for n in names if n in self._warned)
        grp.types = tuple(g.get("t") or ())
        grp.chunks = tuple(sorted({c[0] for c in desc["p"]} | {c[0] for b in desc["b"] for c in b[2]}))
        grp.size = sum(c[1] for c in desc["p"]) + sum(b[1] for b in desc["b"])
        # grp.ids (from the unpickler's memo) lets a later turn's new object that shares with this group
        # (a model fitted on X, an optimizer over a model's parameters) merge with it, whatever names
        # the cell used, exactly as in a kernel that was never restored.
        st.groups[frozenset(names)] = grp
        return True


# ---------------------------------------------------------------------------------------------------
# Dirty-page tracking: which pages of a large buffer a turn wrote, in time proportional to the pages
# written. userfaultfd in asynchronous write-protect mode (UFFD_USER_MODE_ONLY: no privilege needed)
# marks every page written since it was last protected; the PAGEMAP_SCAN ioctl on /proc/self/pagemap
# returns the written ranges and protects them again in one call (Linux 6.7+; CRIU uses the same). Only
# chunks holding written pages are hashed again. A false "clean" would lose data, so a buffer is
# trusted only while (a) it is exported by an array with the same id, (b) at the same address and
# length, (c) in a private mapping (writes through a shared file mapping from elsewhere are
# invisible), (d) registered by no other entry (one scan would consume the other's marks), and (e)
# the scan succeeds with PM_SCAN_CHECK_WPASYNC: memory freed (unmapped) and mapped again at the same
# address is no longer registered, so the scan fails and the buffer is hashed whole. Memory a freed
# array leaves mapped (the heap) changes content only through writes, which are marked. No reference
# to the array is kept: a weak reference would make numpy refuse ndarray.resize.
# Anything else falls back to hashing every chunk (the mode is reported in the snapshot's timings).

TRACK_MIN = 8 << 20  # buffers at least this large are tracked; smaller ones hash faster than a scan
TRACK_ENTRIES = 4096  # more entries than this (most of freed arrays): all are dropped, then re-made
_PAGE = mmap.PAGESIZE
_NR_USERFAULTFD = {"x86_64": 323, "aarch64": 282}
_UFFD_API, _UFFDIO_API, _UFFDIO_REGISTER, _UFFDIO_UNREGISTER = 0xAA, 0xC018AA3F, 0xC020AA00, 0x8010AA01
_UFFD_USER_MODE_ONLY, _UFFDIO_REGISTER_MODE_WP = 1, 2
_UFFD_FEATURE_WP_UNPOPULATED, _UFFD_FEATURE_WP_ASYNC = 1 << 13, 1 << 15
_PAGEMAP_SCAN = 0xC0606610
_PM_SCAN_WP_MATCHING, _PM_SCAN_CHECK_WPASYNC = 1, 2
_PAGE_IS_WRITTEN = 2
_SCAN_VEC = 256


class _Tracked:
    __slots__ = ("oid", "addr", "n", "start", "end", "cs", "hashes")


class _Tracker:
    """Per-buffer chunk hashes kept valid by dirty-page scans (see the section comment)."""

    def __init__(self):
        self.mode = None  # "uffd" once set up; None before; "hash" when unavailable
        self.why = ""
        self.entries = {}  # (addr, n) -> _Tracked
        self.stats = {}

    def reset_stats(self):
        self.stats = {"tracked": 0, "rehashed": 0, "hashed": 0, "fallback": ""}

    def _setup(self):
        if self.mode is not None:
            return self.mode == "uffd"
        self.mode = "hash"
        try:
            import ctypes
            import platform

            nr = _NR_USERFAULTFD.get(platform.machine())
            if nr is None:
                raise OSError("no userfaultfd syscall number for %s" % platform.machine())
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
            fd = libc.syscall(nr, os.O_CLOEXEC | os.O_NONBLOCK | _UFFD_USER_MODE_ONLY)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "userfaultfd: " + os.strerror(ctypes.get_errno()))
            api = (ctypes.c_uint64 * 3)(_UFFD_API, _UFFD_FEATURE_WP_ASYNC | _UFFD_FEATURE_WP_UNPOPULATED, 0)
            if libc.ioctl(fd, _UFFDIO_API, api) < 0:
                os.close(fd)
                raise OSError(ctypes.get_errno(), "UFFDIO_API WP_ASYNC: " + os.strerror(ctypes.get_errno()))
            pm = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
            self.ct, self.libc, self.fd, self.pm = ctypes, libc, fd, pm
            self.vec = (ctypes.c_uint64 * (3 * _SCAN_VEC))()
            self.arg = (ctypes.c_uint64 * 12)()
            # Probe PAGEMAP_SCAN (Linux 6.7+) on a page of our own before trusting it.
            probe = mmap.mmap(-1, _PAGE)
            probe[0:1] = b"x"
            a = ctypes.addressof(ctypes.c_char.from_buffer(probe))
            if not self._register(a, a + _PAGE) or self._scan(a, a + _PAGE) is None:
                raise OSError("PAGEMAP_SCAN with a write-protected range failed")
            probe[0:1] = b"y"
            if self._scan(a, a + _PAGE) != [(a, a + _PAGE)]:
                raise OSError("PAGEMAP_SCAN did not report a written page")
            self._unregister(a, a + _PAGE)
            self._probe = probe  # kept mapped: an unmapped registered range could be reused unregistered
            self.mode = "uffd"
            return True
        except Exception as e:
            self.why = _reason(e)
            return False

    def _register(self, start, end):
        reg = (self.ct.c_uint64 * 4)(start, end - start, _UFFDIO_REGISTER_MODE_WP, 0)
        return self.libc.ioctl(self.fd, _UFFDIO_REGISTER, reg) == 0

    def _unregister(self, start, end):
        rng = (self.ct.c_uint64 * 2)(start, end - start)
        self.libc.ioctl(self.fd, _UFFDIO_UNREGISTER, rng)

    def _scan(self, start, end):
        """Written ranges in [start, end), write-protected again; None when the scan fails (a page
        not registered for async write-protect: the memory is not what was registered)."""
        out = []
        arg, vec = self.arg, self.vec
        while start < end:
            arg[:] = [96, _PM_SCAN_WP_MATCHING | _PM_SCAN_CHECK_WPASYNC, start, end, 0,
                      self.ct.addressof(vec), _SCAN_VEC, 0, 0, _PAGE_IS_WRITTEN, 0, _PAGE_IS_WRITTEN]
            n = self.libc.ioctl(self.pm, _PAGEMAP_SCAN, arg)
            if n < 0:
                return None
            out.extend((vec[3 * i], vec[3 * i + 1]) for i in range(n))
            if n < _SCAN_VEC or arg[4] >= end:
                break
            start = arg[4]
        return out

    def _private(self, start, end):
        """Whether [start, end) lies in private mappings (checked once, at registration)."""
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    rng, perms = line.split(None, 2)[:2]
                    lo, hi = (int(x, 16) for x in rng.split("-"))
                    if hi <= start or lo >= end:
                        continue
                    if perms[3] != "p":
                        return False
            return True
        except OSError:
            return False

    def hashes(self, mv, cs):
        """[[hash, len], ...] of mv's chunks, hashing only chunks with pages written since last time."""
        n = len(mv)
        st = self.stats
        exporter = mv.obj
        np = sys.modules.get("numpy")
        if n < TRACK_MIN or np is None or type(exporter) is not np.ndarray or not self._setup():
            if n >= TRACK_MIN:
                st["fallback"] = st["fallback"] or (self.why or "buffer of a %s" % type(exporter).__name__)
            st["hashed"] += n
            return _hash_all(mv, cs)
        addr = exporter.__array_interface__["data"][0]
        e = self.entries.get((addr, n))
        if e is not None and (e.oid != id(exporter) or e.cs != cs):
            self._drop(e)
            e = None
        dirty = None
        if e is not None:
            dirty = self._scan(e.start, e.end)
            if dirty is None:
                self._drop(e)
                e = None
        if e is None:
            e = self._track(exporter, addr, n, cs)
            if e is None:
                st["fallback"] = st["fallback"] or "buffer at %#x could not be registered" % addr
                st["hashed"] += n
                return _hash_all(mv, cs)
            e.hashes = _hash_all(mv, cs)
            st["tracked"] += n
            st["hashed"] += n
            return [list(h) for h in e.hashes]
        st["tracked"] += n
        for lo, hi in dirty:
            first = max(0, (lo - addr) // cs)
            last = min((n - 1) // cs, (hi - 1 - addr) // cs)
            for i in range(first, last + 1):
                piece = mv[i * cs:(i + 1) * cs]
                e.hashes[i] = [_hash(piece), len(piece)]
                st["rehashed"] += len(piece)
        return [list(h) for h in e.hashes]

    def _track(self, exporter, addr, n, cs):
        start = addr - addr % _PAGE
        end = -(-(addr + n) // _PAGE) * _PAGE
        self.purge()
        for o in [o for o in self.entries.values() if o.start < end and start < o.end]:
            # Two entries over one page: one scan would hide the other's writes. The old one is dropped
            # (its array, if alive, is hashed whole next time: dropping is always safe).
            self._drop(o)
        if not self._private(start, end) or not self._register(start, end):
            return None
        if self._scan(start, end) is None:  # protects every page: from here on, writes are seen
            self._unregister(start, end)
            return None
        e = _Tracked()
        e.oid, e.addr, e.n, e.start, e.end, e.cs, e.hashes = id(exporter), addr, n, start, end, cs, []
        self.entries[(addr, n)] = e
        return e

    def _drop(self, e):
        self.entries.pop((e.addr, e.n), None)
        self._unregister(e.start, e.end)

    def seed(self, exporter, addr, n, cs, chunks):
        """Trusts chunks ([[hash, len], ...], what a restore just mapped at addr) as the hashes of
        exporter's buffer from now on: a restored array is not hashed again at its first checkpoint."""
        if n < TRACK_MIN or not self._setup():
            return False
        old = self.entries.get((addr, n))
        if old is not None:
            self._drop(old)
        e = self._track(exporter, addr, n, cs)
        if e is None:
            return False
        e.hashes = [[h, ln] for h, ln in chunks]
        return True

    def close(self):
        """Unregisters everything and closes the descriptors (tests; a kernel keeps its tracker)."""
        for e in list(self.entries.values()):
            self._drop(e)
        if self.mode == "uffd":
            os.close(self.fd)
            os.close(self.pm)
        self.mode, self.why = "hash", "closed"

    def purge(self, keep=TRACK_ENTRIES):
        """Bounds the entries (those of freed arrays are only found stale when used or overlapped)."""
        if len(self.entries) > keep:
            for e in list(self.entries.values()):
                self._drop(e)


def _hash_all(mv, cs):
    return [[_hash(mv[off:off + cs]), len(mv[off:off + cs])] for off in range(0, len(mv), cs)]


# ---------------------------------------------------------------------------------------------------
# Interpreter state that is not a variable: the global random generators (a notebook seeds once and
# draws in later cells), matplotlib's rcParams, magics defined in the session. Each is one "state"
# group named "@...", captured at every snapshot (small: unchanged state hashes to a known chunk and
# writes nothing) and applied after the data groups on restore.


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
    mpl = sys.modules.get("matplotlib")
    if mpl is not None and hasattr(mpl, "rcParamsOrig"):
        orig, get, missing = mpl.rcParamsOrig, dict.get, _OOBBytes  # dict's own methods: no validation
        diff = {}
        for k, v in dict.items(mpl.rcParams):
            o = get(orig, k, missing)
            if v is not o and k != "backend" and (o is missing or _differs(v, o)):
                diff[k] = v
        if diff:
            out.append(("@matplotlib.rcParams", dict(sorted(diff.items()))))
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
    em = getattr(shell, "extension_manager", None)
    loaded = sorted(getattr(em, "loaded", None) or ())
    if loaded:  # %load_ext: their magics and hooks come back by loading them again
        out.append(("@extensions", loaded))
    return out


def _differs(a, b):
    try:
        return bool(a != b)
    except Exception:
        return True


def _apply_state(shell, name, value):
    """Puts one saved state back (the inverse of _capture_state)."""
    if name == "@random":
        importlib.import_module("random").setstate(value)
    elif name == "@numpy.random":
        importlib.import_module("numpy").random.set_state(value)
    elif name == "@torch.random":
        torch = importlib.import_module("torch")
        torch.set_rng_state(torch.tensor(list(value), dtype=torch.uint8))
    elif name == "@matplotlib.rcParams":
        import warnings

        rc = importlib.import_module("matplotlib").rcParams
        bad = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k, v in value.items():
                try:
                    rc[k] = v
                except Exception as e:
                    bad.append("%s: %s" % (k, _reason(e)))
        if bad:
            raise ValueError("rcParams not restored: " + "; ".join(bad))
    elif name == "@magics":
        for kind, magic, fn in value:
            shell.register_magic_function(fn, kind, magic)
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


def _memo_objects(u):
    """The objects an unpickler memoised (the ones the pickler memoised)."""
    memo = getattr(u, "memo", None)
    try:
        return list((memo.copy() if hasattr(memo, "copy") else dict(memo or {})).values())
    except Exception:
        return []


def _loaded_ids(objs, obj, values, desc):
    """The ids a restored group's objects share by: the same rule as _pickle_one's, applied to the
    unpickler's memo (the objects the pickler memoised) instead of the pickler's."""
    _library_dispatch()  # the group may have imported numpy or torch
    shared = _shared_types()
    ids = set()
    if sum(c[1] for c in desc["p"]) <= BIG_GRAPH:
        ids.update(id(o) for o in objs if not isinstance(o, shared) and type(o) is not object and o is not obj)
    else:
        for v in values:
            kids = v.values() if isinstance(v, dict) else v if isinstance(v, (list, set, tuple)) else ()
            ids.update(id(k) for k in kids if not isinstance(k, shared) and type(k) is not object)
        arrays = tuple(t for t in (_DISPATCH_TYPES.get("ndarray"), _DISPATCH_TYPES.get("tensor")) if t)
        if arrays:
            ids.update(id(o) for o in objs if isinstance(o, arrays))
    ids.update(id(v) for v in values if not isinstance(v, shared))
    return frozenset(ids)


VERIFY_MAX = 64 << 10  # groups up to this size (pickle + buffers) are unpickled again and compared


def _verify(r, cur):
    """Cheap check that a small, changed group restores as itself: unpickle it in process and compare
    each value with the live one where the comparison is definite (same type; a real __eq__ answering
    False, or, for a class with its own pickling, differing plain attributes). A custom __reduce__ or
    __getstate__ that restores something else is then reported (the group is still saved: it is what
    pickling can do) instead of passed off as restored. Returns the skipped entries, () when none."""
    if r.fmt != "p" or len(r.data) + sum(len(b.raw()) for b in r.buffers) > VERIFY_MAX:
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


def _codes_of(v):
    """Code objects whose globals v may use when called: a session function, a session class's
    methods, a session object's class methods, bound methods."""
    if v is None:
        return []
    if isinstance(v, types.MethodType):
        v = v.__func__
    if isinstance(v, types.FunctionType):
        return [v.__code__] if v.__module__ == "__main__" else []
    cls = v if isinstance(v, type) else type(v)
    if getattr(cls, "__module__", None) != "__main__":
        return []
    out = []
    for klass in cls.__mro__:
        if getattr(klass, "__module__", None) != "__main__":
            continue
        for attr in vars(klass).values():
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if isinstance(attr, property):
                out.extend(f.__code__ for f in (attr.fget, attr.fset, attr.fdel) if isinstance(f, types.FunctionType))
            elif isinstance(attr, types.FunctionType):
                out.append(attr.__code__)
    return out


def _map_file(path):
    """Maps a restored buffer copy-on-write (no copy until written) and unlinks its file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            m = bytearray()
        else:
            m = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        os.unlink(path)
    except OSError:
        pass
    return m


def _cleanup(g):
    for p in ([g["pf"]] if g.get("pf") else []) + list(g.get("bf") or ()):
        try:
            os.unlink(p)
        except OSError:
            pass


def _cwd():
    try:
        return os.getcwd()
    except OSError:
        return ""


def _reason(e):
    s = str(e) or type(e).__name__
    return s if len(s) <= 300 else s[:297] + "..."


def install(spool_dir, shell=None, spool_host=None):
    """Creates the agent for this kernel, binds it as __carryover__ and tracks cells via pre_run_cell.
    spool_dir is the spool as this kernel sees it; spool_host as the Go server sees it (echoed back in
    answers so the server needs no per-kernel state)."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    old = shell.user_ns.get("__carryover__")
    if old is not None and hasattr(old, "pre_run_cell"):
        try:
            shell.events.unregister("pre_run_cell", old.pre_run_cell)
        except ValueError:
            pass
    agent = Agent(shell, spool_dir)
    agent.spool_host = spool_host or spool_dir
    shell.events.register("pre_run_cell", agent.pre_run_cell)
    shell.user_ns["__carryover__"] = agent
    shell.user_ns_hidden["__carryover__"] = agent
    return agent
