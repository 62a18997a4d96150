"""In-process unit tests of the agent's cell analysis and pickling parts (no kernel, no spool).

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py' (go test runs it too)."""

import ast
import io
import json
import os
import pickle
import tempfile
import unittest

import numpy as np

import carryover_agent as ca


def names_of(src):
    v = ca._CellNames()
    v.visit(ast.parse(src))
    return v.names, v.dynamic


def roundtrip(obj):
    ca._library_dispatch()
    bufs = []
    b = io.BytesIO()
    ca._DataPickler(b, protocol=ca.PROTOCOL, buffer_callback=bufs.append).dump(obj)
    return pickle.loads(b.getvalue(), buffers=[bytearray(pb.raw()) for pb in bufs])


class AnalysisTest(unittest.TestCase):
    def test_function_locals_are_not_globals(self):
        names, dynamic = names_of("def f(a):\n    b = a + c\n    return b\nx = f(y)")
        self.assertEqual(names, {"f", "c", "x", "y"})
        self.assertFalse(dynamic)

    def test_global_declaration_and_comprehension(self):
        names, _ = names_of("def g():\n    global total\n    total = 1\nz = [i * k for i in rng]")
        self.assertTrue({"g", "total", "z", "k", "rng"} <= names)
        self.assertNotIn("i", names)

    def test_dynamic_calls(self):
        self.assertTrue(names_of("exec('x = 1')")[1])
        self.assertTrue(names_of("from os import *")[1])
        self.assertFalse(names_of("print(1)")[1])

    def test_magic_arguments_are_names(self):
        names, dynamic = names_of("get_ipython().run_line_magic('time', 'x = f(y)')")
        self.assertTrue({"x", "f", "y"} <= names)
        self.assertFalse(dynamic)
        self.assertTrue(names_of("get_ipython().run_line_magic('run', 'script.py')")[1])

    def test_code_names_follow_nested_code(self):
        def outer():
            def inner():
                return helper_a
            return helper_b, inner
        self.assertTrue({"helper_a", "helper_b"} <= ca._code_names(outer.__code__, set()))


class PicklingTest(unittest.TestCase):
    def test_view_of_owner_stays_a_view(self):
        big = np.arange(100.0)
        b2, v2, s2 = roundtrip((big, big[10:20], big[::3]))
        self.assertIs(v2.base, b2)
        self.assertIs(s2.base, b2)
        b2[11] = -1
        self.assertEqual(v2[1], -1)

    def test_view_alone_keeps_its_root(self):
        big = np.arange(100.0)
        v2 = roundtrip(big[5:8])
        self.assertEqual(v2.tolist(), [5.0, 6.0, 7.0])
        self.assertEqual(v2.base.shape, (100,))

    def test_builtin_dtype_is_the_singleton(self):
        a2 = roundtrip(np.zeros(3, dtype=np.int16))
        self.assertIs(a2.dtype, np.dtype(np.int16))
        s2 = roundtrip(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
        self.assertEqual(s2.dtype.names, ("a", "b"))

    def test_closed_file_keeps_name_and_mode(self):
        with tempfile.TemporaryDirectory() as d:
            cwd = os.getcwd()
            os.chdir(d)
            try:
                with open("w.txt", "w") as f:
                    f.write("x")
                g = roundtrip(f)
                self.assertEqual((g.name, g.mode, g.closed), ("w.txt", "w", True))
                h = open("w.txt", "a")
                h2 = roundtrip(h)
                h2.write("y")
                h2.close()
                h.close()
                with open("w.txt") as r:
                    self.assertEqual(r.read(), "xy")  # reopened for append, not truncated
            finally:
                os.chdir(cwd)

    def test_tensor_grad_kept_and_graph_refused(self):
        import torch

        w = torch.ones(3, requires_grad=True)
        loss = (w * 3).sum()
        with self.assertRaises(pickle.PicklingError) as cm:
            roundtrip(loss)
        self.assertIn("grad_fn=SumBackward0", str(cm.exception))
        loss.backward()
        w2 = roundtrip(w)
        self.assertEqual(w2.grad.tolist(), [3.0, 3.0, 3.0])
        self.assertTrue(w2.requires_grad and w2.is_leaf)

    def test_verify_names_a_lossy_reduce_only(self):
        class Cur:
            def __init__(self):
                self.n = 0

            def __reduce__(self):
                return (Cur, ())

        ca.Cur = Cur  # picklable by reference for the test
        Cur.__module__, Cur.__qualname__ = "carryover_agent", "Cur"
        try:
            agent = object.__new__(ca.Agent)  # only its pickling, no shell
            agent._shared = ca._shared_types()
            c = Cur()
            c.n = 4
            r = ca.pickle_one(agent, ["c"], [c])
            warn = ca._verify(r, {"c": c})
            self.assertEqual(len(warn), 1)
            self.assertIn("'n'", warn[0]["reason"])
            c.n = 0
            r = ca.pickle_one(agent, ["c"], [c])
            self.assertEqual(ca._verify(r, {"c": c}), ())
        finally:
            del ca.Cur


class FakeShell:
    """What analyze() needs of an IPython shell: IPython's own cell transform (magics become calls)."""

    def transform_cell(self, raw):
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(raw)


class AnalyzeTest(unittest.TestCase):
    def test_class_body_locals_stay_local(self):
        names, _ = names_of("class C(Base):\n    z = 1\n    def m(self):\n        return q + z\n")
        self.assertTrue({"C", "Base", "q"} <= names)
        self.assertNotIn("z", names)
        self.assertNotIn("self", names)

    def test_lambda_params_and_except_names(self):
        names, _ = names_of("f = lambda a, *r, **k: a + b\ntry:\n    pass\nexcept E as err:\n    pass\n")
        self.assertTrue({"f", "b", "E"} <= names)  # err is unbound after the block: found as "gone"
        self.assertFalse({"a", "r", "k"} & names)

    def test_magics_through_ipython_transform(self):
        cur = {"x": 1, "f": len, "y": []}
        names, dynamic = ca.analyze(FakeShell(), ["%time x = f(y)"], cur)
        self.assertTrue({"x", "f", "y"} <= names)
        self.assertFalse(dynamic)
        self.assertTrue(ca.analyze(FakeShell(), ["%run other.py"], cur)[1])

    def test_unparsable_cell_is_dynamic(self):
        self.assertTrue(ca.analyze(FakeShell(), ["def (:"], {})[1])

    def test_globals_of_called_session_functions_transitively(self):
        ns = {}
        exec("def leaf():\n    return deep\ndef f():\n    return leaf() + mid\nclass K:\n    def m(self):\n"
             "        return via_method\n", ns)
        for v in ns.values():
            if hasattr(v, "__module__"):
                v.__module__ = "__main__"
        cur = {"f": ns["f"], "leaf": ns["leaf"], "k": ns["K"](), "deep": 1, "mid": 2, "via_method": 3}
        names, _ = ca.analyze(FakeShell(), ["r = f()\nk.m()"], cur)
        self.assertTrue({"f", "leaf", "deep", "mid", "via_method"} <= names, names)


def agent_stub():
    """An Agent with only what the pickling functions read (see pickling.py's docstring)."""
    agent = object.__new__(ca.Agent)
    agent._shared = ca._shared_types()
    agent._defnames = {}
    agent._sentinels = ca._sentinels()
    return agent


class GroupingTest(unittest.TestCase):
    def test_shared_objects_form_one_group(self):
        from carryover_agent.groups import _State

        inner = [1, 2]
        cur = {"a": inner, "b": {"k": inner}, "c": [3], "i": 7}
        skipped = {}
        out = ca.pickle_data(agent_stub(), sorted(cur), cur, _State(), {}, skipped)
        self.assertEqual(sorted(r.names for r in out), [("a", "b"), ("c",), ("i",)])
        both = next(r for r in out if r.names == ("a", "b"))
        a2, b2 = pickle.loads(both.data)
        self.assertIs(b2["k"], a2)  # one pickle: the memo keeps the sharing
        self.assertEqual(skipped, {})

    def test_new_object_sharing_with_a_saved_group_pulls_it_in(self):
        from carryover_agent.groups import _Group, _State

        X = np.arange(10.0)
        prev = _State()
        old = _Group(["X"], "data")
        old.ids = frozenset({id(X)})
        prev.groups[frozenset(["X"])] = old
        cur = {"X": X, "model": {"data": X}}
        out = ca.pickle_data(agent_stub(), ["model"], cur, prev, prev.name2group(), {})
        self.assertEqual([r.names for r in out], [("X", "model")])

    def test_unpicklable_value_is_skipped_with_reason(self):
        from carryover_agent.groups import _State

        cur = {"g": (i for i in range(3)), "ok": 1}
        skipped = {}
        out = ca.pickle_data(agent_stub(), sorted(cur), cur, _State(), {}, skipped)
        self.assertEqual([r.names for r in out], [("ok",)])
        self.assertEqual(skipped["g"]["type"], "generator")
        self.assertIn("generator", skipped["g"]["reason"])

    def test_large_bytes_go_out_of_band(self):
        blob = b"z" * ca.BIG_BYTES
        r = ca.pickle_one(agent_stub(), ["blob"], [blob])
        self.assertEqual(len(r.buffers), 1)
        self.assertLess(len(r.data), 200)
        self.assertEqual(pickle.loads(r.data, buffers=r.buffers), blob)
        small = ca.pickle_one(agent_stub(), ["s"], [b"z" * 100])
        self.assertEqual(small.buffers, [])


class ReducersTest(unittest.TestCase):
    def test_held_lock_comes_back_released(self):
        import threading

        lock, rlock = threading.Lock(), threading.RLock()
        lock.acquire()
        rlock.acquire()
        l2, r2 = roundtrip((lock, rlock))
        self.assertTrue(l2.acquire(blocking=False))
        self.assertTrue(r2.acquire(blocking=False))
        lock.release()
        rlock.release()

    def test_session_class_by_value_and_sentinel_by_reference(self):
        import dataclasses
        import dill

        ns = {"__name__": "__main__"}
        exec("import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int = 1\n    def double(self):\n"
             "        return 2 * self.x\n", ns)
        P = ns["P"]
        agent = agent_stub()
        r = ca.pickle_def(agent, ["P"], P, {})
        self.assertEqual(r.fmt, "d")
        u = dill.Unpickler(io.BytesIO(r.data))
        u.persistent_load = ca._persistent_load({})
        P2 = u.load()
        self.assertIsNot(P2, P)
        self.assertEqual((P2.__qualname__, P2.__module__), ("P", "__main__"))
        self.assertEqual(P2(x=4).double(), 8)
        # the dataclass Field's sentinel came back as THE sentinel, so dataclasses still works
        self.assertIs(dataclasses.fields(P2)[0].default_factory, dataclasses.MISSING)

    def test_verify_names_a_type_changing_reduce(self):
        class Odd:
            def __reduce__(self):
                return (str, ("odd",))

        ca.Odd = Odd
        Odd.__module__, Odd.__qualname__ = "carryover_agent", "Odd"
        try:
            o = Odd()
            r = ca.pickle_one(agent_stub(), ["o"], [o])
            warn = ca._verify(r, {"o": o})
            self.assertEqual(len(warn), 1)
            self.assertIn("restores as str, not Odd", warn[0]["reason"])
        finally:
            del ca.Odd


class SpoolTest(unittest.TestCase):
    def test_describe_cuts_chunks_and_lists_children(self):
        from carryover_agent.spool import describe

        big = np.arange(3 * 4096, dtype=np.uint8)
        r = ca.pickle_one(agent_stub(), ["big"], [big])
        tracker = ca._Tracker()
        tracker.reset_stats()
        g, pieces = describe(tracker, r, 4096, {"big": big})
        desc = json.loads(bytes(pieces[-1][1]))
        self.assertEqual(pieces[-1][0], g.ref)
        self.assertEqual([n for _, n in desc["b"][0][2]], [4096, 4096, 4096])
        self.assertEqual(sorted(g.chunks), sorted({h for h, _, _ in pieces[:-1]}))
        self.assertEqual(g.chunks, tuple(pieces[-1][2]))
        self.assertEqual((g.names, g.types, g.size), (("big",), ("ndarray",), len(r.data) + 3 * 4096))

    def test_small_buffers_in_band(self):
        """An array under SMALL_BUFFER is in the pickle stream (a figure's thousands of tiny arrays
        each cost a hash and a chunk entry out of band); a larger one is out of band."""
        small, large = np.arange(8.0), np.arange(4096.0)
        r = ca.pickle_one(agent_stub(), ["small"], [small])
        self.assertEqual(r.buffers, [])
        self.assertTrue(np.array_equal(pickle.loads(r.data), small))
        r = ca.pickle_one(agent_stub(), ["large"], [large])
        self.assertEqual(len(r.buffers), 1)

    def test_emit_inlines_small_and_spools_large(self):
        from carryover_agent.spool import emit

        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "tok")
            made = [False]
            small = emit(out, made, "h1", b"abc", None)
            self.assertEqual((small["c"], small["d"], made[0]), ("raw", "YWJj", False))
            noise = os.urandom(ca.INLINE_MAX + 1)
            e = emit(out, made, "h2", noise, ["c1"])
            self.assertEqual((e["f"], e["ch"], e["c"]), ("h2", ["c1"], "raw"))
            with open(os.path.join(out, "h2"), "rb") as f:
                self.assertEqual(f.read(), noise)
            z = emit(out, made, "h3", b"\0" * (ca.INLINE_MAX * 4), None)
            self.assertEqual(z["c"], "zstd")
            self.assertLess(z["s"], z["n"])


if __name__ == "__main__":
    unittest.main()


class NsShell:
    """A shell with a namespace, for the agent's namespace and state functions."""

    def __init__(self):
        self.user_ns, self.user_ns_hidden, self.last_execution_result = {}, {}, None


class StateReuseTest(unittest.TestCase):
    """snapshot._pickle_state reuses the last pickle of random-generator state only while a new capture
    is certainly equal: a stale pickle would bring back draws the live kernel never made."""

    def test_same(self):
        from carryover_agent.snapshot import _same
        key = np.arange(624, dtype=np.uint32)
        st = ("MT19937", key, 3, 0, 0.0)
        self.assertTrue(_same(st, ("MT19937", key.copy(), 3, 0, 0.0)))
        self.assertTrue(_same((3, tuple(range(625)), None), (3, tuple(range(625)), None)))
        for other in [("MT19937", key + 1, 3, 0, 0.0), ("MT19937", key, 4, 0, 0.0), ("MT19937", key, 3, 0, -0.0),
                      ("MT19937", key.astype(np.int64), 3, 0, 0.0), ("MT19937", key, 3, False, 0.0),
                      ("MT19937", key, 3, 0), ["MT19937", key, 3, 0, 0.0]]:
            self.assertFalse(_same(st, other), other)
        self.assertFalse(_same((1, 2), (1, True)))  # equal, but True pickles otherwise
        self.assertFalse(_same(0.0, -0.0))  # equal, but pickled otherwise
        self.assertFalse(_same([1], [1]))  # only immutable shapes are trusted

    def test_draws_repickle_and_no_draw_reuses(self):
        import random

        from carryover_agent.snapshot import _pickle_state
        agent = ca.Agent(NsShell(), "/nonexistent")
        np.random.seed(1)
        random.seed(1)

        def state():
            return {r.names[0]: r for r in _pickle_state(agent, {})}

        first = state()
        again = state()
        self.assertIs(again["@numpy.random"], first["@numpy.random"])
        self.assertIs(again["@random"], first["@random"])
        np.random.random()
        random.random()
        drawn = state()
        for name in ("@numpy.random", "@random"):
            self.assertIsNot(drawn[name], first[name])
            self.assertNotEqual(drawn[name].data + b"".join(bytes(b.raw()) for b in drawn[name].buffers),
                                first[name].data + b"".join(bytes(b.raw()) for b in first[name].buffers))
        np.random.seed(1)
        random.seed(1)
        back = state()  # equal to the first capture again: its bytes, whichever object
        for name in ("@numpy.random", "@random"):
            self.assertEqual(back[name].data, first[name].data)


    def test_plain_state_pickles_to_pickle_ones_bytes(self):
        """A state item of plain data (a history entry, a setting's capture, random's state) is
        pickled by the plain pickler to the very bytes pickle_one writes (the chunk a checkpoint
        stores is the same), and anything else (an array, a function, too many values) is left to
        pickle_one."""
        import random

        from carryover_agent import history
        from carryover_agent.pickling import PLAIN_ITEMS, pickle_one, pickle_plain
        agent = ca.Agent(NsShell(), "/nonexistent")
        entry = history.Entry((7, "x = 1\nprint('é')", 1.25, True, None, 7))
        for value in [entry, (entry, entry), random.getstate(), {"a": [1, 2.5, None], "b": ("s", b"b", False)},
                      ("<dict>", ("k", -0.0)), "x" * 100_000]:
            plain = pickle_plain(["@v"], value)
            self.assertIsNotNone(plain, value)
            self.assertEqual(plain.data, pickle_one(agent, ["@v"], [value]).data, value)
            self.assertEqual(plain.buffers, [])
            self.assertEqual(pickle.loads(plain.data), tuple(value) if type(value) is history.Entry else value)
        for value in [np.arange(3), (1, np.float64(2.0)), [len], {"f": lambda: 1}, list(range(PLAIN_ITEMS))]:
            self.assertIsNone(pickle_plain(["@v"], value), value)


class UserNamesTest(unittest.TestCase):
    def test_fast_filter_matches_keep(self):
        sh = NsShell()
        agent = ca.Agent(sh, "/nonexistent")
        obj = object()
        for n in ["x", "_x", "__x", "__x__", "_", "__", "___", "_1", "_i1", "_ii", "_i", "_i1a", "In", "Out", "exit",
                  "get_ipython", "__builtins__", "__carryover__", "_12", "a_1", "_oh", "hid", "x__", "__x_", "_5_"]:
            sh.user_ns[n] = obj
        sh.user_ns_hidden["hid"] = obj
        want = {k for k, v in agent.ns.items() if agent._keep(k, v)}
        self.assertEqual(set(agent._user_names()), want)
        self.assertEqual(want, {"x", "_x", "__x", "_i1a", "a_1", "x__", "__x_", "_5_"})


class OwnersWarmTest(unittest.TestCase):
    """owners.warm in a template, then a fork: the child indexes again only the modules whose dicts
    changed since (here, one it rebinds an attribute of), and finds the rebound object; where the
    tags cannot be read, it indexes everything again, and still finds it."""

    def setUp(self):
        import calendar  # noqa: F401  (imported before warm: the template's modules)
        import colorsys  # noqa: F401

    def tearDown(self):
        from carryover_agent import owners

        owners._warmed.clear()
        owners._warmed["pid"] = None

    def test_child_indexes_again_only_what_changed(self):
        from carryover_agent import owners

        owners.warm()
        self.assertTrue(owners._warmed.get("addrs"), "this CPython's dict version tags are not readable")
        got = self._in_child()
        self.assertTrue(got.get("found") and got.get("calendar") and not got.get("colorsys"), got)

    def test_without_tags_the_child_indexes_everything_again(self):
        from carryover_agent import owners

        reader = owners._tag_reader
        owners._tag_reader = lambda: None
        try:
            owners.warm()
            self.assertNotIn("addrs", owners._warmed)
            got = self._in_child()
        finally:
            owners._tag_reader = reader
        self.assertTrue(got.get("found") and got.get("calendar") and got.get("colorsys"), got)

    def _in_child(self):
        """Forks; the child rebinds an attribute of calendar, leaves colorsys alone and says what it
        would index again and whether the index finds the rebound object."""
        import calendar

        from carryover_agent import owners

        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(r)
                mine = ["the child's"]
                calendar.carryover_test_value = mine
                changed = owners._changed_since_warm()
                found = owners.owner_of(mine) == ("calendar", "carryover_test_value")
                os.write(w, json.dumps({"found": found, "calendar": "calendar" in changed,
                                        "colorsys": "colorsys" in changed}).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            got = json.loads(f.read() or "{}")
        _, status = os.waitpid(pid, 0)
        self.assertEqual(status, 0)
        return got
