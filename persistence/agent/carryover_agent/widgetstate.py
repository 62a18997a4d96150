"""Widgets (ipywidgets) that come back: the live widgets saved with every checkpoint, and re-created
with their model ids in the kernel a restore fills, so a slider at 13 is at 13 in the kernel and on the
page, ``interact`` callbacks and observers run again, and an Output widget shows what it showed.

Why it looks like this
----------------------
* A widget holds the kernel's comm (and through it the session's HMAC key): it cannot be pickled, and
  a function decorated by ``@interact`` holds its widget as ``.widget``. So a widget anywhere in a
  value (a variable, a list, that function's ``.widget``) pickles as a reference to its model id
  (``_reduce_widget``/``_widget_ref``), and the widgets themselves travel in one "state" group,
  "@ipywidgets" (a libstate Setting: applied after the session's definitions, before its data, so
  data groups find their widgets). A definition restored before it holds a placeholder, resolved
  when the widgets are back.
* Per widget: its class, its traits (synced or not: a Dropdown's ``options`` are not synced) and
  the model ids it refers to (its layout, its children), so widgets are re-created children first
  with the same model ids; then, once all exist, what Python holds beside the traits: attributes
  (interact's function, its kwargs widgets, its Output) and observers (``observe``, a Button's
  clicks are attributes). A class whose constructor cannot take its own traits (``interactive``)
  is built by ``Widget.__init__``: its attributes complete it.
* What an Output widget shows is known only to the frontend in ipywidgets 6 (it routes outputs by
  msg_id), so the kernel keeps it: while an Output captures (``with out:``), what is displayed or
  printed is also recorded here (bounded), and saved with the widget.
* What cannot be saved (an observer that does not pickle) is named once per kernel in the
  checkpoint's skipped, as "@ipywidgets", not at every turn.
* ``op_widgets`` answers the live models (comm_open data, children first) and the Output widgets'
  outputs: the server sends them to a page that connects, or after a new kernel's restore.
"""

import importlib
import io
import json
import pickle
import sys
import threading
from itertools import chain
from operator import is_

from . import pickling
from .common import PROTOCOL

NAME = "@ipywidgets"
# HasTraits' own bookkeeping and the widget's live plumbing: never saved.
_INTERNAL = frozenset(("_cross_validation_lock", "_model_id", "_trait_notifiers", "_trait_validators", "_trait_values"))
_NOT_TRAITS = frozenset(("comm", "keys", "log", "parent", "config", "_property_lock", "_display_callbacks",
                         "_msg_callbacks", "_states_to_send"))
MAX_OUTPUTS = 200  # outputs kept per Output widget (the oldest go first)
MAX_OUTPUT_BYTES = 1 << 20

_STRICT = [True]  # False while a restore loads definitions: a widget not re-created yet is a placeholder
_REFS = []  # model ids met by _reduce_widget during one dump
_NAMED = set()  # what this kernel has already named as not saved
OUTPUTS = {}  # model id of an Output widget -> the outputs it shows
_STREAM_TAIL = {}  # model id -> text printed into its last stream output, not joined yet (_outputs)
_OUT_VER = {}  # model id -> a new token at every change to its OUTPUTS (the capture's cache compares it)
_CAP = []  # the Output widgets capturing now, innermost last (main thread)
_MAIN = threading.main_thread()


def _widget_class():
    m = sys.modules.get("ipywidgets")
    return getattr(m, "Widget", None) if m is not None else None


# --- references ---------------------------------------------------------------------------------------

class _Pending:
    """A widget a definition referred to, before the widgets are back (resolved by _resolve)."""

    __slots__ = ("model_id",)

    def __init__(self, model_id):
        self.model_id = model_id


def _widget_ref(model_id):
    """The live widget of model_id (pickles name this function: keep its name and module)."""
    W = _widget_class()
    if W is None:
        W = importlib.import_module("ipywidgets").Widget
    w = W.widgets.get(model_id)
    if w is not None:
        return w
    if _STRICT[0]:
        raise LookupError("widget %s was not re-created" % model_id)
    return _Pending(model_id)


def _reduce_widget(w):
    comm = getattr(w, "comm", None)
    if comm is None:
        raise pickle.PicklingError("a closed widget (%s): it has no model left to save" % type(w).__name__)
    _REFS.append(comm.comm_id)
    return (_widget_ref, (comm.comm_id,))


def dispatch(table):
    """Puts _reduce_widget in the pickler's dispatch table for every widget class (new subclasses
    too: called before every snapshot)."""
    W = _widget_class()
    if W is None:
        return
    stack = [W]
    while stack:
        c = stack.pop()
        if table.get(c) is not _reduce_widget:
            table[c] = _reduce_widget
        stack.extend(c.__subclasses__())


def begin_restore():
    _STRICT[0] = False


def end_restore():
    _STRICT[0] = True


# --- capture ------------------------------------------------------------------------------------------

def _dumps(obj):
    """Pickles obj with the agent's picklers (widgets by reference, session definitions by name);
    returns (bytes, format "p" | "d", model ids referred to)."""
    del _REFS[:]
    buf = io.BytesIO()
    try:
        pickling._DataPickler(buf, protocol=PROTOCOL).dump(obj)
        return buf.getvalue(), "p", tuple(_REFS)
    except Exception as first:
        if pickling.dill is None:
            raise first
        del _REFS[:]
        buf = io.BytesIO()
        pickling._DillPickler(buf, _agent(), None).dump(obj)
        return buf.getvalue(), "d", tuple(_REFS)


def _loads(data, fmt="p"):
    u = (pickling.dill.Unpickler if fmt == "d" else pickle.Unpickler)(io.BytesIO(data))
    u.persistent_load = pickling._persistent_load(_ns())
    return u.load()


def _agent():
    return _ns().get("__carryover__")


def _ns():
    from IPython import get_ipython

    return get_ipython().user_ns


def _traits(w):
    return {n: getattr(w, n) for n, t in w.traits().items()
            if n not in _NOT_TRAITS and not n.startswith(("_model_", "_view_")) and not t.read_only}


def _handlers(w):
    """[(trait name, type, handler)] of the observers added to w (the class's own @observe handlers
    come back with the class)."""
    EventHandler = sys.modules["traitlets"].EventHandler
    out = []
    for name, by_type in (getattr(w, "_trait_notifiers", None) or {}).items():
        for typ, hs in by_type.items():
            out.extend((name, typ, h) for h in hs if not isinstance(h, EventHandler))
    return out


def _live_part(mid, w, failed):
    """What Python holds beside w's traits, pickled: (bytes, format). When the whole does not
    pickle, each item is tried alone, so one that cannot be saved is left out (and named) without
    losing the rest."""
    attrs = {k: v for k, v in w.__dict__.items() if k not in _INTERNAL}
    obs = _handlers(w)
    try:
        data, fmt, _ = _dumps({"attrs": attrs, "obs": obs})
        return data, fmt
    except Exception:
        pass
    out = {"attrs": {}, "obs": []}
    for k, v in attrs.items():
        try:
            _dumps(v)
            out["attrs"][k] = v
        except Exception as e:
            failed.append((mid, "attr " + k, "%s's attribute %s: %s" % (type(w).__name__, k, _why(e))))
    for name, typ, h in obs:
        try:
            _dumps(h)
            out["obs"].append((name, typ, h))
        except Exception as e:
            failed.append((mid, "obs %s %r" % (name, h), "%s's observer %s of %r: %s" % (
                type(w).__name__, getattr(h, "__name__", type(h).__name__), name, _why(e))))
    data, fmt, _ = _dumps(out)
    return data, fmt


def _why(e):
    s = str(e) or type(e).__name__
    return s if len(s) < 200 else s[:200] + "..."


# model id -> (the objects its last capture read, its record): a widget whose traits, attributes,
# observers and outputs are the very same objects is not pickled again (the objects are held here,
# so an address is never reused by another value). A session with hundreds of widgets (every
# tqdm.notebook bar is six) would otherwise pay for all of them at every turn.
_CACHE = {}
_LAST = [None]  # the last value capture answered, answered again when no widget changed


def _seen(w, mid):
    """The objects w's record is made of, flat: its trait values, attributes and observers (with
    their names) and its outputs' version. Compared by identity only (an equal int or str that is
    another object counts as a change: pickled again, never stale)."""
    tv = w._trait_values
    attrs = [(k, v) for k, v in w.__dict__.items() if k not in _INTERNAL]
    return tuple(chain(tv, tv.values(), chain.from_iterable(attrs), chain.from_iterable(_handlers(w)),
                       (_OUT_VER.get(mid),)))


def _unchanged(a, b):
    return len(a) == len(b) and all(map(is_, a, b))


def capture(skipped):
    """The "@ipywidgets" state: None without live widgets."""
    W = _widget_class()
    if W is None or not W.widgets:
        _CACHE.clear()
        return None
    recs, failed, changed = [], [], False
    live = list(W.widgets.items())
    for mid, w in live:
        try:
            seen = _seen(w, mid)
        except Exception:  # a widget without traitlets' bookkeeping: pickled every time
            seen = (object(),)
        hit = _CACHE.get(mid)
        if hit is not None and hit[0] is w and _unchanged(hit[1], seen):
            recs.append(hit[2])
            continue
        changed = True
        rec = _record(mid, w, failed)
        if rec is not None:
            _CACHE[mid] = (w, seen, rec)
            recs.append(rec)
    for mid in [m for m in _CACHE if m not in W.widgets]:
        del _CACHE[mid]
        changed = True
    _name_once(skipped, failed)
    if not changed and _LAST[0] is not None and len(_LAST[0]["widgets"]) == len(recs):
        return _LAST[0]
    _LAST[0] = {"v": 1, "widgets": tuple(recs)}
    return _LAST[0]


def _record(mid, w, failed):
    """(model id, class module, class name, traits pickle, its format, model ids it refers to,
    outputs, live pickle, its format), or None when its traits cannot be pickled (named)."""
    cls = type(w)
    try:
        data, fmt, refs = _dumps(_traits(w))
    except Exception as e:
        failed.append((mid, "traits", "%s %s: %s" % (cls.__name__, mid[:8], _why(e))))
        return None
    try:
        ldata, lfmt = _live_part(mid, w, failed)
    except Exception as e:
        failed.append((mid, "live", "%s %s's observers and attributes: %s" % (cls.__name__, mid[:8], _why(e))))
        ldata, lfmt = b"", "p"
    return (mid, cls.__module__, cls.__qualname__, data, fmt, tuple(sorted(set(refs) - {mid})),
            tuple(_outputs(mid) or ()), ldata, lfmt)


def _name_once(skipped, failed):
    new = [(k, what, reason) for k, what, reason in failed if (k, what) not in _NAMED]
    if skipped is None or not new:
        return
    for k, what, _ in new:
        _NAMED.add((k, what))
    skipped[NAME] = {"name": NAME, "type": "state", "reason": "widgets saved, but not all: " +
                     "; ".join(r for _, _, r in new[:5]) + ("" if len(new) <= 5 else "; and %d more" % (len(new) - 5))}


# --- restore ------------------------------------------------------------------------------------------

def _class(module, qualname):
    if module == "__main__":
        obj = _ns()[qualname.split(".")[0]]
        rest = qualname.split(".")[1:]
    else:
        obj = importlib.import_module(module)
        rest = qualname.split(".")
    for part in rest:
        obj = getattr(obj, part)
    return obj


def _ordered(recs):
    """recs with every widget after those it refers to (a cycle keeps the saved order)."""
    by_id = {r[0]: r for r in recs}
    out, seen = [], set()

    def visit(r, depth=0):
        if r[0] in seen:
            return
        seen.add(r[0])
        for d in r[5]:
            if d in by_id and depth < 1000:
                visit(by_id[d], depth + 1)
        out.append(r)

    for r in recs:
        visit(r)
    return out


def _build(W, rec):
    mid, module, qualname, data, fmt = rec[:5]
    cls = _class(module, qualname)
    traits = _loads(data, fmt)
    if not _takes_traits(cls):
        w = cls.__new__(cls)
        W.__init__(w, model_id=mid, **traits)
        return w
    try:
        return cls(model_id=mid, **traits)
    except TypeError:  # a constructor of its own: the attributes restored next complete it
        W.widgets.pop(mid, None)
        w = cls.__new__(cls)
        W.__init__(w, model_id=mid, **traits)
        return w


def _set_traits(w, traits):
    with w.hold_sync():
        for k, v in traits.items():
            if getattr(w, k) is not v:
                setattr(w, k, v)


def _takes_traits(cls):
    """interactive builds new child widgets from its arguments: it is re-created from its parts."""
    inter = getattr(sys.modules.get("ipywidgets"), "interactive", None)
    return not (inter is not None and issubclass(cls, inter))


def apply(value):
    """Re-creates the saved widgets (those not live already) with their model ids, then their
    attributes, observers and outputs; raises, after doing all it can, naming what failed."""
    W = importlib.import_module("ipywidgets").Widget
    failed, made = [], []
    for rec in _ordered(value.get("widgets") or ()):
        mid = rec[0]
        try:
            if mid in W.widgets:  # a restore into the kernel that has it: the saved values, in place
                _set_traits(W.widgets[mid], _loads(rec[3], rec[4]))
                continue
            made.append((_build(W, rec), rec))
        except Exception as e:
            failed.append("%s %s: %s" % (rec[2], mid[:8], _why(e)))
            continue
        if rec[6]:
            OUTPUTS[mid] = list(rec[6])
            _STREAM_TAIL.pop(mid, None)
    end_restore()
    for w, rec in made:
        try:
            _apply_live(w, _loads(rec[7], rec[8]) if rec[7] else {})
        except Exception as e:
            failed.append("%s %s's observers and attributes: %s" % (rec[2], rec[0][:8], _why(e)))
    _resolve(W)
    if failed:
        raise ValueError("widgets not re-created: " + "; ".join(failed))


def _apply_live(w, part):
    for k, v in (part.get("attrs") or {}).items():
        object.__setattr__(w, k, v)
    for name, typ, h in part.get("obs") or ():
        w.observe(h, names=name, type=typ)


def _resolve(W):
    """Puts the widgets in place of the placeholders the session's definitions were restored with
    (``@interact``'s ``f.widget``)."""
    for v in list(_ns().values()):
        d = getattr(v, "__dict__", None) if callable(v) else None
        if not isinstance(d, dict):
            continue
        for k, x in list(d.items()):
            if isinstance(x, _Pending) and x.model_id in W.widgets:
                d[k] = W.widgets[x.model_id]


def reset():
    """A checkpoint without widgets: the live ones (a kernel that drew some since) stay."""


# --- what an Output widget shows ------------------------------------------------------------------

def install_capture(m):
    """Has ipywidgets' Output (module m) record what it captures (``with out:``) in OUTPUTS."""
    Output = getattr(m, "Output", None)
    if Output is None or getattr(Output, "_carryover_capture", False):
        return
    enter, leave = Output.__enter__, Output.__exit__

    def __enter__(self):
        r = enter(self)
        if threading.current_thread() is _MAIN and getattr(self, "comm", None) is not None:
            _hook_streams()
            if self.comm.comm_id not in OUTPUTS:
                OUTPUTS[self.comm.comm_id] = []
            _CAP.append(self.comm.comm_id)
        return r

    def __exit__(self, etype, evalue, tb):
        try:
            return leave(self, etype, evalue, tb)
        finally:
            mid = getattr(getattr(self, "comm", None), "comm_id", None)
            if mid in _CAP:
                del _CAP[len(_CAP) - 1 - _CAP[::-1].index(mid)]

    Output.__enter__, Output.__exit__ = __enter__, __exit__
    Output._carryover_capture = True


_PENDING_CLEAR = set()  # Output widgets whose clear_output(wait=True) waits for the next output


def _keep_output(o):
    if not _CAP or threading.current_thread() is not _MAIN:
        return
    mid = _CAP[-1]
    _OUT_VER[mid] = object()
    outs = OUTPUTS.setdefault(mid, [])
    if mid in _PENDING_CLEAR:
        _PENDING_CLEAR.discard(mid)
        del outs[:]
        _STREAM_TAIL.pop(mid, None)
    if o["type"] == "stream" and outs and outs[-1]["type"] == "stream" and outs[-1]["name"] == o["name"]:
        pieces = _STREAM_TAIL.setdefault(mid, [])
        pieces.append(o["text"])
        if len(pieces) >= 256:
            _outputs(mid)
        return
    _outputs(mid)
    outs.append(o)
    while len(outs) > 1 and (len(outs) > MAX_OUTPUTS or sum(len(repr(x)) for x in outs) > MAX_OUTPUT_BYTES):
        del outs[0]


def _outputs(mid):
    """OUTPUTS[mid] with the pieces printed since into its last stream joined, and that stream cut
    to its last MAX_OUTPUT_BYTES (the oldest output goes first). A print adds a piece: joining the
    stream's text at every print copied all of it each time (a loop printing into an Output widget
    was quadratic, and one stream grew without the bound)."""
    outs = OUTPUTS.get(mid)
    pieces = _STREAM_TAIL.pop(mid, None)
    if outs and pieces:
        outs[-1] = dict(outs[-1], text="".join([outs[-1]["text"]] + pieces)[-MAX_OUTPUT_BYTES:])
    return outs


def _clear(wait=False):
    if not _CAP or threading.current_thread() is not _MAIN:
        return
    _OUT_VER[_CAP[-1]] = object()
    if wait:
        _PENDING_CLEAR.add(_CAP[-1])
    else:
        del OUTPUTS.setdefault(_CAP[-1], [])[:]
        _STREAM_TAIL.pop(_CAP[-1], None)


def _hook_streams():
    """Wraps (once each) stdout's and stderr's write, and the display publisher's publishing and
    clear_output, to record what goes to the capturing Output widget; all still go out as before."""
    for name in ("stdout", "stderr"):
        s = getattr(sys, name)
        if getattr(s, "_carryover_widget_tap", False):
            continue
        write = s.write

        def tapped(text, _write=write, _name=name):
            if _CAP and isinstance(text, str) and text:
                _keep_output({"type": "stream", "name": _name, "text": text})
            return _write(text)

        try:
            s.write = tapped
            s._carryover_widget_tap = True
        except (AttributeError, TypeError):
            pass
    try:
        from IPython import get_ipython

        pub = get_ipython().display_pub
    except Exception:
        return
    if getattr(pub, "_carryover_widget_tap", False):
        return
    if hasattr(pub, "register_hook"):
        pub.register_hook(_display_hook)
    clear = pub.clear_output

    def clear_output(wait=False, _clear_output=clear):
        _clear(wait)
        return _clear_output(wait)

    pub.clear_output = clear_output
    pub._carryover_widget_tap = True


def _display_hook(msg):
    if _CAP:
        c = msg.get("content") or {}
        if msg.get("msg_type") == "display_data":
            _keep_output({"type": "display_data", "data": c.get("data") or {}, "metadata": c.get("metadata") or {}})
    return msg


# --- the page's view of the live widgets -----------------------------------------------------------

def op_widgets(agent, a):
    """The live widgets as a page needs them: {"models": [{"comm_id", "data", "outputs"?}], children
    first}, data being the comm_open's (ipywidgets 6: the state itself; binary values left out)."""
    W = _widget_class()
    if W is None or not W.widgets:
        return {"models": []}
    recs = []
    for mid, w in list(W.widgets.items()):
        try:
            state = w.get_state()
        except Exception:
            continue
        state = {k: v for k, v in state.items() if not isinstance(v, (bytes, bytearray, memoryview))}
        refs = tuple(x[len("IPY_MODEL_"):] for x in _strings(state) if x.startswith("IPY_MODEL_"))
        recs.append((mid, None, None, None, None, refs, state))
    out = []
    for mid, _, _, _, _, _, state in _ordered(recs):
        m = {"comm_id": mid, "data": state}
        if _outputs(mid):
            m["outputs"] = OUTPUTS[mid]
        try:
            json.dumps(m)
        except (TypeError, ValueError):  # a value JSON cannot carry: that widget is not sent
            continue
        out.append(m)
    return {"models": out}


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _strings(x)
