"""Replay: rebuilds, after a restore, the variables the checkpoint could not save (a tensor inside an
autograd graph, a generator, a connection), by running again the turns of the history (history.py)
that made them, with their output suppressed.

The plan for a missing name X: the last turn that binds it, then every later turn that touches a name
the plan binds (closure: a turn that advanced the generator, trained the layer, read the result), in
order. It runs only when
- every turn of the plan is safe to run twice (safety.py) and in the kept history;
- the plan's inputs (names a turn reads from before the plan) are unchanged since the plan's first
  turn: modules, classes, functions and immutable values, or values no later turn outside the plan
  touched; mutable inputs are handed to the replay as deep copies, so the replay never changes a
  restored value, and a copy the replay changed means a plan turn mutates its input: refused;
- its recorded time fits the budget.
It runs in a scratch namespace, each turn with the global generators set to their state just before
that turn ran live (seeded draws repeat); then every name the plan binds that was restored must come
out EQUAL to the restored value (this is what proves the replay reproduced the live run: the layer's
initial weights, an advanced counter), every name it rebuilt must match the fingerprint the checkpoint
saved of it (fingerprint.py: a tensor's shape, dtype, grad_fn and data, as the kernel held it at the
checkpoint, so a change the history does not show, an input file rewritten, is caught), and only then
are the plan's names bound, all together (the rebuilt `output`'s graph must point at the bound
`layer`, not a twin). Anything else leaves the name reported, with the reason."""

import builtins
import contextlib
import copy
import io
import sys
import time
import types

from . import fingerprint, history
from .common import _reason
from .safety import Turn

_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), frozenset, range, type(Ellipsis))


def rebuild(agent, missing, budget_ms):
    """{"recomputed": [{name, turn, ms}], "not_replayed": [{name, reason}]} for the missing names."""
    out = {"recomputed": [], "not_replayed": []}
    if not missing:
        return out
    shell = agent.shell
    turns = [(e, Turn(e.code, shell)) for e in agent.history]
    done = set()
    spent = 0.0
    for name in sorted(missing):
        if name in done:
            continue
        plan, why = _plan(agent, turns, name, missing)
        if plan is None:
            out["not_replayed"].append({"name": name, "reason": "not replayed: " + why})
            continue
        cost = sum(e.ms for e, _ in plan)
        if spent + cost > budget_ms:
            out["not_replayed"].append({"name": name, "reason": "not replayed: replaying turns %s would take "
                                        "about %.0f ms, over the replay budget (%.0f ms left)" % (
                                            _turn_list(plan), cost, budget_ms - spent)})
            continue
        t0 = time.perf_counter()
        bound, why = _run(agent, plan, missing)
        ms = (time.perf_counter() - t0) * 1000
        spent += ms
        if bound is None:
            out["not_replayed"].append({"name": name, "reason": "not replayed: " + why})
            continue
        for n in sorted(bound & set(missing)):
            turn = max(e.number for e, t in plan if n in t.binds)
            fp = agent._fingerprints.get(n)
            out["recomputed"].append({"name": n, "turn": turn, "ms": round(ms, 3),
                                      "turns": [e.number for e, _ in plan],
                                      "verified": fingerprint.compared(fp) if fp else ""})
            done.add(n)
    return out


def _plan(agent, turns, name, missing):
    """([(entry, Turn)] to run, "") or (None, why). Starts at the last turn that binds name; an
    input of the plan that is missing too (a loss computed from a lost output) pulls in the turn
    that binds it, until the plan reads nothing that is missing."""
    start = set()
    need = [name]
    while need:
        n = need.pop()
        first = next((i for i in range(len(turns) - 1, -1, -1) if n in turns[i][1].binds), None)
        if first is None:
            if agent.history_base:
                return None, "the turn that made %s is older than the kept history (%d turns)" % (n, history.KEEP)
            return None, "no turn in the session's history binds %s" % n
        start.add(first)
        plan = _closure(turns, start)
        need = [m for m in _inputs(plan) if m in missing and m not in agent.ns and _binder(turns, m) not in start]
    for e, t in plan:
        if t.unsafe:
            return None, "turn %d is not safe to run again: %s" % (e.number, t.unsafe)
    why = _inputs_unchanged(agent, turns, min(start), plan)
    if why:
        return None, why
    return plan, ""


def _binder(turns, n):
    return next((i for i in range(len(turns) - 1, -1, -1) if n in turns[i][1].binds), None)


def _closure(turns, start):
    """The start turns, then every later turn that touches a name the plan binds."""
    plan, bound = [], set()
    for i in range(min(start), len(turns)):
        e, t = turns[i]
        if i in start or t.touched & bound:
            plan.append((e, t))
            bound |= t.binds
    return plan


def _inputs_unchanged(agent, turns, first, plan):
    """Why an input of the plan may differ now from what the plan's first turn read, or ""."""
    inputs = _inputs(plan)
    in_plan = {id(e) for e, _ in plan}
    later = [(e, t) for e, t in turns[first:] if id(e) not in in_plan]
    for n in sorted(inputs):
        if n not in agent.ns:
            continue
        v = agent.ns[n]
        if _shared(v):
            continue
        for e, t in later:
            if n in t.touched:
                return "turn %d reads %s, which turn %d (not replayed) may have changed since" % (
                    _first_reader(plan, n), n, e.number)
        if any(n in t.binds for _, t in plan):
            return "turn %d reads %s from before the replay and the replay binds it again" % (_first_reader(plan, n), n)
    return ""


def _inputs(plan):
    """Names the plan reads from before its first turn: each turn's inputs not bound by an earlier
    plan turn."""
    bound, out = set(), set()
    for _, t in plan:
        out |= t.inputs - bound
        bound |= t.binds
    return out


def _first_reader(plan, n):
    return next(e.number for e, t in plan if n in t.inputs)


def _shared(v):
    """Values a replay may use as they are: nothing a turn can change in place."""
    if isinstance(v, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)):
        return True
    if isinstance(v, _IMMUTABLE):
        return True
    if isinstance(v, tuple):
        return all(_shared(x) for x in v)
    return False


def _run(agent, plan, missing):
    """(names bound, "") after running the plan and verifying it, or (None, why)."""
    ns, copies, why = _scratch(agent, plan)
    if why:
        return None, why
    saved_rng = history.rng_states()
    try:
        for e, t in plan:
            why = _exec(agent, ns, e)
            if why:
                return None, why
    finally:
        history.set_rng_states(saved_rng)
    for n, (orig, dup) in copies.items():
        if not _equal(orig, dup):
            return None, "the replay changed its input %s in place (turn %d)" % (n, _first_reader(plan, n))
    binds = set()
    for _, t in plan:
        binds |= t.binds
    binds = {n for n in binds if n in ns}
    for n in sorted(binds & set(missing)):
        fp = agent._fingerprints.get(n)
        why = fingerprint.differs(fp, fingerprint.take(ns[n])) if fp else ""
        if why:
            return None, "rebuilt %s differs from the saved one: %s" % (n, why)
    for n in sorted(binds):
        if n in agent.ns and n not in missing:
            if not _equal(agent.ns[n], ns[n]):
                return None, "replaying turns %s made %s differently from the saved one" % (_turn_list(plan), n)
    for n in binds:
        if n in agent.ns or n in missing:
            agent.ns[n] = ns[n]
    return binds & (set(agent.ns)), ""


def _scratch(agent, plan):
    """A namespace for the replay: the plan's inputs (copies of mutable ones), builtins, get_ipython;
    session functions re-made over this namespace, so they read the replay's names."""
    ns = {"__builtins__": builtins, "__name__": "__main__", "get_ipython": lambda: agent.shell}
    copies = {}
    for n in sorted(_inputs(plan)):
        if n not in agent.ns:
            continue
        v = agent.ns[n]
        if isinstance(v, types.FunctionType) and v.__globals__ is agent.ns:
            ns[n] = types.FunctionType(v.__code__, ns, v.__name__, v.__defaults__, v.__closure__)
            continue
        if _shared(v):
            ns[n] = v
            continue
        try:
            dup = copy.deepcopy(v)
        except Exception as e:
            return None, None, "its input %s cannot be copied for the replay (%s)" % (n, _reason(e))
        ns[n] = dup
        copies[n] = (v, dup)
    return ns, copies, ""


def _exec(agent, ns, entry):
    """Runs one turn's code in ns with the generators as they were before it ran live; output goes
    nowhere. A turn that raised live may raise again (the same turn, the same state): that is its
    outcome. One that did not must not."""
    rng = history.rng_of(agent, entry)
    if rng is None:
        return "the generator states turn %d found are no longer kept" % entry.number
    history.set_rng_states(rng)
    shell = agent.shell
    try:
        code = compile(shell.transform_cell(entry.code), "<replay of turn %d>" % entry.number, "exec")
    except Exception as e:
        return "turn %d does not compile: %s" % (entry.number, _reason(e))
    pub = getattr(shell, "display_pub", None)
    saved_publish = getattr(pub, "publish", None)
    if pub is not None:
        pub.publish = lambda *a, **k: None
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            exec(code, ns)
    except BaseException as e:  # noqa: BLE001 - a turn's own KeyboardInterrupt/SystemExit included
        if entry.ok:
            return "turn %d raised when replayed: %s" % (entry.number, _reason(e))
    finally:
        if pub is not None:
            pub.publish = saved_publish
    return ""


def _equal(a, b):
    """Whether a replayed value equals the restored one. Tensors, modules and optimizers by their
    data; numpy arrays by value; types with their own == by it; anything else by its pickle."""
    if a is b:  # a module, a class, an interned value: the replay imported or read the same object
        return True
    if type(a) is not type(b):
        return False
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(a, torch.Tensor):
            return (a.shape == b.shape and a.dtype == b.dtype and a.requires_grad == b.requires_grad
                    and bool(torch.equal(a.detach(), b.detach())))
        if isinstance(a, torch.nn.Module) or isinstance(a, torch.optim.Optimizer):
            return _equal_state(a.state_dict(), b.state_dict())
    np = sys.modules.get("numpy")
    if np is not None and isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if type(a).__eq__ is not object.__eq__:
        try:
            r = a == b
            if isinstance(r, bool):
                return r
            return bool(getattr(r, "all", lambda: r)())
        except Exception:
            pass
    try:
        import pickle

        return pickle.dumps(a, 4) == pickle.dumps(b, 4)
    except Exception:
        return False


def _equal_state(a, b):
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal_state(x, y) for x, y in zip(a, b))
    return _equal(a, b)


def _turn_list(plan):
    return ", ".join(str(e.number) for e, _ in plan)
