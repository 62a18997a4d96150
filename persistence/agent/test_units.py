"""In-process unit tests of the agent's cell analysis and pickling parts (no kernel, no spool).

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py' (go test runs it too)."""

import ast
import io
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


if __name__ == "__main__":
    unittest.main()
