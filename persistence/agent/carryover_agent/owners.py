"""Objects that belong to a module: restored as that module's attribute, so they keep their identity.

``from scipy.stats import norm``, ``from matplotlib import rcParams``, ``from os import environ``: the
name is bound to the very object a module exposes. Pickled by value, it came back as a copy: a
``norm`` whose random state was no longer numpy's global one, an ``rcParams`` that no longer changed
any plot. Two rules keep them what they were, as pickle already does for functions and classes:

* **Library state objects** (``CARRIED``: numpy's and ``random``'s global generators, torch's default
  generator, ``matplotlib.rcParams``, ``pandas.options``, ``os.environ``) are pickled as a reference to
  their module attribute wherever they appear (a name, or inside another value: the ``norm`` that
  holds numpy's global generator), because their value travels as a state group of its own
  (interp.py, libstate.py, the env). They never make two values one group either.
* **Any other module's object bound to a name** (``owner_of``: found in an index of the attributes of
  the imported modules) is pickled by value as before, and the group says which module attribute it
  was (its ``owners``). A restore imports the module and binds its attribute instead of the copy when
  the attribute pickles to the same bytes as the saved value (after the library state is back): the
  object is then the module's, and its value what was saved. When it does not (the session changed
  it, or the module builds another), the copy is bound and the restore names it in ``failed``.

Only importable modules count (never ``__main__``), only an attribute that IS the object at checkpoint
time (identity, checked again when the index answers), and only small values (a large one is never
imported again to be compared)."""

import ctypes
import importlib
import os
import sys
import types
from array import array
from itertools import compress
from operator import itemgetter, not_

from .common import PROTOCOL, SMALL_GROUP

# Library state objects whose value a state group carries: (module, attribute).
CARRIED = (("numpy.random.mtrand", "_rand"), ("random", "_inst"), ("torch", "default_generator"),
           ("matplotlib", "rcParams"), ("pandas", "options"), ("os", "environ"))

# Attribute values never indexed: pickled by reference already (_import_ref), or immutable values
# whose identity no code relies on.
_NOT_OWNED = (type, types.FunctionType, types.ModuleType, int, float, complex, str, bytes, bool, type(None),
              tuple, frozenset, range, slice)
_NOT_OWNED_EXACT = frozenset(_NOT_OWNED) | {types.BuiltinFunctionType, types.WrapperDescriptorType,
                                            types.MethodDescriptorType, types.GetSetDescriptorType}
_SKIP_MODULES = ("__main__", "__mp_main__", "carryover_agent", "builtins")

_index = {}  # id(object) -> (module, attribute): the public, shortest name of each module attribute
_scanned = set()  # the modules indexed
_nmods = [0]


def _module_attr(mod, attr):
    """The module attribute a pickle names (the rebuild function of CARRIED objects)."""
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _rank(mod, attr):
    """Which of several names of one object to keep: public before private, then the shortest module."""
    private = any(p[:1] == "_" for p in mod.split(".")) or attr[:1] == "_"
    return (private, mod.count("."), len(mod), mod, attr)


def index():
    """Indexes the modules imported so far (the pool's warm-up calls it after its imports)."""
    _refresh()


def _refresh():
    """Indexes the modules imported since the last call (a turn that imports nothing costs one len),
    and, once in a process forked from a template that indexed for it (warm), the modules that
    changed since. Each module's attributes are filtered by exact type at C speed: of the 50,000
    attributes of a kernel with numpy, pandas, matplotlib and scipy, a few thousand are objects to
    index."""
    mods = sys.modules
    if _warmed["pid"] not in (None, os.getpid()):
        _warmed["pid"] = os.getpid()
        _scanned.difference_update(_changed_since_warm())
        _nmods[0] = 0
    if len(mods) == _nmods[0]:
        return
    _nmods[0] = len(mods)
    user = _user_dicts()
    for name in [n for n in list(mods) if n not in _scanned]:
        _scanned.add(name)
        d = getattr(mods.get(name), "__dict__", None)
        if type(d) is dict and not name.startswith(_SKIP_MODULES) and id(d) not in user:
            _scan(name, d)


def _scan(name, d):
    """Indexes the attributes of module name (its dict d)."""
    items = list(d.items())
    for k, v in compress(items, map(not_, map(_NOT_OWNED_EXACT.__contains__, map(type, map(itemgetter(1), items))))):
        if k[:2] == "__":
            continue
        old = _index.setdefault(id(v), (name, k))
        if old[0] != name and _rank(name, k) < _rank(*old):
            _index[id(v)] = (name, k)


# What warm() left for the processes forked after it: the pid that made it (None: not made), the
# modules' names and their dicts' addresses and version tags then, and the dicts themselves (kept
# alive, so that an address stays theirs; never iterated in a child, which would touch their pages).
_warmed = {"pid": None}


def warm():
    """Indexes the modules in a kernel template, before it forks (agent.template_warm), and notes each
    module dict's version tag (PEP 509: CPython 3.11 gives a dict a new one at every change): a
    child then indexes again only the modules its own start changed (sys.stdout is the kernel's
    stream there), reading those tags from memory without touching the dicts; the index is as of
    the child's first use, as when the child made it all. Where the tags cannot be read, a child
    indexes everything again."""
    _refresh()
    _warmed["pid"] = os.getpid()  # without the tags below, a child indexes everything again
    tag = _tag_reader()
    if tag is None:
        return
    mods = sys.modules
    named = [(n, mods[n].__dict__) for n in sorted(_scanned)
             if n in mods and type(getattr(mods[n], "__dict__", None)) is dict]
    addrs = array("Q", [id(d) for _, d in named])
    _warmed.update(names=tuple(n for n, _ in named), addrs=addrs,
                   tags=array("Q", [tag(a) for a in addrs]), keep=tuple(d for _, d in named))


def _changed_since_warm():
    """The names of the modules to index again in a forked child: those whose dict's tag changed
    since warm, or all of them when warm could not note the tags."""
    if "addrs" not in _warmed:
        return set(_scanned)
    tag = _tag_reader()
    names, tags = _warmed["names"], _warmed["tags"]
    return {names[i] for i, a in enumerate(_warmed["addrs"]) if tag(a) != tags[i]}


def _tag_reader():
    """A function reading the version tag of the dict at an address (the word after ob_refcnt,
    ob_type and ma_used), or None when a live dict does not show that layout: a new tag at each
    change, and its size in the word before."""
    if sys.implementation.name != "cpython" or sys.version_info[:2] not in ((3, 11), (3, 12)):
        return None

    def tag(addr):
        return ctypes.c_uint64.from_address(addr + 24).value

    d = {}
    seen = [tag(id(d))]
    for op in (lambda: d.__setitem__("a", 1), lambda: d.__setitem__("a", 2), lambda: d.pop("a")):
        op()
        seen.append(tag(id(d)))
    d["b"] = 3
    ok = len(set(seen)) == len(seen) and ctypes.c_ssize_t.from_address(id(d) + 16).value == 1
    return tag if ok else None


def _user_dicts():
    """The ids of the namespaces that are the session's, not a module's: __main__'s (the kernel's
    user namespace) and the modules that alias it (multiprocessing's __mp_main__)."""
    out = set()
    for name in ("__main__", "__mp_main__"):
        d = getattr(sys.modules.get(name), "__dict__", None)
        if d is not None:
            out.add(id(d))
    return out


def owner_of(v):
    """(module, attribute) when v is, right now, an attribute of an importable module; else None."""
    if isinstance(v, _NOT_OWNED):
        return None
    _refresh()
    ref = _index.get(id(v))
    if ref is None:
        return None
    m = sys.modules.get(ref[0])
    if m is None or getattr(m, ref[1], None) is not v or id(getattr(m, "__dict__", None)) in _user_dicts():
        return None
    return ref


def resolve(ref):
    """The live object of "module:attribute" (importing the module)."""
    mod, _, attr = ref.partition(":")
    return _module_attr(mod, attr)


def carried_ids():
    """The ids of the CARRIED objects of the modules imported: never ids a group shares by."""
    out = set()
    for mod, attr in CARRIED:
        m = sys.modules.get(mod)
        if m is not None and hasattr(m, attr):
            out.add(id(getattr(m, attr)))
    return out


def dispatch(table):
    """Puts a reducer for the type of each CARRIED object of the modules imported into table (the
    agent's dispatch table), wrapping the reducer the type had: that object pickles as its module
    attribute, any other instance as before. Cheap when done."""
    for mod, attr in CARRIED:
        m = sys.modules.get(mod)
        obj = getattr(m, attr, None) if m is not None else None
        if obj is None or (mod, attr) in _wrapped:
            continue
        _wrapped.add((mod, attr))
        t = type(obj)
        table[t] = _by_reference(t, table.get(t), mod, attr, obj)


_wrapped = set()


def _by_reference(t, inner, mod, attr, obj):
    prev = inner._carried if hasattr(inner, "_carried") else {}
    carried = dict(prev)
    carried[id(obj)] = (mod, attr, obj)

    def reduce(o):
        hit = carried.get(id(o))
        if hit is not None and hit[2] is o:
            return (_module_attr, (hit[0], hit[1]))
        if base is not None:
            return base(o)
        return o.__reduce_ex__(PROTOCOL)

    base = getattr(inner, "_base", inner)
    reduce._carried = carried
    reduce._base = base
    return reduce


def small(r):
    """Whether a pickled group is small enough to be compared with its module's object at restore."""
    return len(r.data) + sum(memoryview(b).nbytes for b in r.buffers) <= SMALL_GROUP
