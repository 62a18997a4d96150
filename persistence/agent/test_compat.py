"""Checkpoints written before the agent was a package still load: testdata/v1 was made by the
single-module agent (testdata/make_v1_checkpoint.py), so its pickles name the rebuild functions as
carryover_agent.<name>. Restored with the package, every value must come back as it was, and pickling
the restored values again must give the same bytes (nothing is rewritten after an upgrade).

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py' (go test runs it too)."""

import json
import os
import pickletools
import shutil
import unittest

import carryover_agent as ca
from test_agent import Harness

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata", "v1")
FIXDIR = "/tmp/carryover-v1-fixture"  # as in make_v1_checkpoint.py

CHECK = r'''
import numpy as np
checks = {
    "blob": blob == bytes(range(256)) * 8 and type(blob) is bytes,
    "buf": buf == bytearray(b"xy" * 1024) and type(buf) is bytearray,
    "closed_f": closed_f is f and closed_f.closed and closed_f.mode == "w" and closed_f.name.endswith("notes.txt"),
    "reader": reader.read() == "world" and reader.mode == "r",
    "mm": type(mm) is np.memmap and mm.tolist() == list(range(8)),
    "view": view.base is big and view.tolist() == [5.0, 6.0, 7.0, 8.0, 9.0],
    "i16": i16.dtype is np.dtype(np.int16),
    "p": type(p).__name__ == "Point" and p.norm2() == 25,
    "fav": fav is Color.GREEN,
    "random": random.random() == __import__("random").Random(7).random(),
    "np.random": np.random.rand() == np.random.RandomState(7).rand(),
}
if "w" in dir():
    import torch
    checks["w"] = w.grad.tolist() == [3.0, 3.0, 3.0] and w.is_leaf
    checks["gen"] = torch.rand(2, generator=gen).tolist() == torch.rand(2, generator=torch.Generator().manual_seed(5)).tolist()
sorted(k for k, ok in checks.items() if not ok)
'''


def manifest():
    with open(os.path.join(FIX, "manifest.json")) as f:
        return json.load(f)


def old_globals():
    """(module, name) of every global the fixture's pickle streams import from carryover_agent*."""
    out = set()
    for g in manifest()["groups"]:
        if g["k"] == "imp":
            continue
        with open(os.path.join(FIX, "chunks", g["r"]), "rb") as f:
            desc = json.load(f)
        data = b"".join(_read(os.path.join(FIX, "chunks", h)) for h, _ in desc["p"])
        strs, memo, last = [], [], None
        for op, arg, _ in pickletools.genops(data):
            if op.name == "MEMOIZE":
                memo.append(last)
            elif op.name in ("BINGET", "LONG_BINGET", "GET") and int(arg) < len(memo) and memo[int(arg)] is not None:
                strs.append(memo[int(arg)])
            elif isinstance(arg, str):
                strs.append(arg)
            last = arg if isinstance(arg, str) and op.name != "STACK_GLOBAL" else None
            if op.name == "STACK_GLOBAL" and len(strs) >= 2 and strs[-2].startswith("carryover_agent"):
                out.add((strs[-2], strs[-1]))
            elif op.name == "GLOBAL" and arg.startswith("carryover_agent"):
                out.add(tuple(arg.split(" ", 1)))
    return out


class CompatTest(unittest.TestCase):
    def test_fixture_uses_the_old_module_path(self):
        found = old_globals()
        want = {"_bytes_from", "_reopen_file", "_array_from_buffer", "_reopen_memmap", "_make_view",
                "_class_skeleton", "_class_setstate", "_enum_skeleton"}
        if _has_torch():
            want |= {"_tensor_with_grad", "_torch_generator"}
        self.assertEqual({m for m, _ in found}, {"carryover_agent"}, found)
        self.assertTrue(want <= {n for _, n in found}, want - {n for _, n in found})
        # and every one of them is importable at that path, as the same function the package uses
        for _, n in found:
            self.assertIn(getattr(ca, n), ca.PICKLED_BY_NAME)

    def test_new_pickles_keep_the_old_path(self):
        for fn in ca.PICKLED_BY_NAME:
            self.assertEqual(fn.__module__, "carryover_agent", fn)
        data = __import__("pickle").dumps(ca._OOBBytes(b"x" * 10), protocol=5)
        self.assertIn(b"carryover_agent\x94\x8c\x0b_bytes_from", data)

    def test_old_checkpoint_restores(self):
        os.makedirs(FIXDIR, exist_ok=True)
        with open(os.path.join(FIXDIR, "notes.txt"), "w") as f:
            f.write("hello world")
        import numpy as np

        np.arange(8, dtype=np.int32).tofile(os.path.join(FIXDIR, "mm.bin"))
        h = Harness()
        try:
            shutil.rmtree(h.store)
            shutil.copytree(os.path.join(FIX, "chunks"), h.store)
            out = h.kernel([{"run": CHECK}, {"checkpoint": True}], manifest=manifest())
        finally:
            h.close()
        r = out["restore"]
        self.assertEqual(r["failed"], [])
        self.assertTrue({"blob", "buf", "f", "closed_f", "reader", "mm", "big", "view", "p", "Point", "fav",
                         "Color"} <= set(r["restored"]), r["restored"])
        self.assertEqual(out["steps"][0], "[]")  # no check failed
        cp = out["steps"][1]["result"]
        self.assertEqual(cp["skipped"], [])
        # The restored values pickle to the bytes the old agent wrote, so an upgrade rewrites nothing:
        # what is saved again is exactly what the old agent saves again after restoring this same
        # checkpoint (checked by hand): the reader (its position moved), gen (drawn from), checks
        # (new), w (torch's own pickle of a restored tensor differs), blob/buf (the fixture was
        # made with BIG_BYTES lowered so they went out-of-band; now they are pickled in-band) and the
        # small arrays big, view and i16 (their buffers are now in the stream: pickling.SMALL_BUFFER).
        self.assertTrue(set(cp["saved"]) <= {"reader", "gen", "checks", "w", "blob", "buf", "big", "view", "i16"}, cp["saved"])
        for n in ("p", "Point", "Color", "fav", "mm", "f", "closed_f"):
            self.assertNotIn(n, cp["saved"])


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _has_torch():
    import importlib.util

    return importlib.util.find_spec("torch") is not None  # not imported: keeps this process light


if __name__ == "__main__":
    unittest.main()
