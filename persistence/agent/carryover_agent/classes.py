"""Session classes and functions pickled by value: a class through a skeleton (memoised first, so
methods and class attributes referring to the class resolve to it) plus a state setter, which also
works for Enum and ABC; module-level sentinels that must keep their identity."""

import abc
import enum
import sys
import types


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

