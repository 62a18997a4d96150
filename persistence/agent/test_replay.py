"""Replay (carryover_agent/replay.py): a kernel killed after every cell continues as the live one did,
for what pickle cannot save. Each "kernel" is a fresh process (test_agent.Harness): the only state a
later one has is the checkpoint of the one before."""

import json
import os
import unittest

from test_agent import Harness

TORCH = [
    "import torch, torch.nn as nn, torch.optim as optim\ntorch.manual_seed(0)",
    "x = torch.tensor([[1.0, 2.0], [3.0, 4.0]]); print(x @ x.T)",
    "layer = nn.Linear(2, 1); input_data = torch.tensor([[1.0, 2.0]])\noutput = layer(input_data)",
    "target = torch.tensor([[1.0]]); loss_fn = nn.MSELoss()\nloss = loss_fn(output, target)",
    "optimizer = optim.SGD(layer.parameters(), lr=0.01)\noptimizer.zero_grad(); loss.backward(); optimizer.step()",
    "w = [p.detach().tolist() for p in layer.parameters()]",
]
TORCH_CHECK = "(w, float(loss), output.grad_fn is not None)"

GEN = [
    "gen = (i * i for i in range(10))",
    "a = next(gen)",
    "b = next(gen)",
    "c = next(gen)",
]


def killed_after_every_cell(h, cells, check, replay=True, numbers=None):
    """Runs each cell in its own process, restoring the checkpoint of the previous one, then check in
    a last one; the cells are numbered 1, 2, ... (or numbers: the session's turn numbers, as the
    server sets each kernel's counter). Returns (the check's repr, the last restore's answer)."""
    numbers = numbers or list(range(1, len(cells) + 2))
    manifest = None
    for i, cell in enumerate(cells):
        out = h.kernel([{"run": cell}, {"checkpoint": True}], manifest, execution_count=numbers[i], replay=replay)
        if isinstance(out["steps"][0], str) and out["steps"][0].startswith("ERROR"):
            return out["steps"][0], out.get("restore")
        manifest = out["steps"][1]["manifest"]
    out = h.kernel([{"run": check}], manifest, execution_count=numbers[len(cells)], replay=replay)
    return out["steps"][0], out.get("restore")


def live(h, cells, check):
    out = h.kernel([{"run": c} for c in cells] + [{"run": check}])
    return out["steps"][-1]


class ReplayTest(unittest.TestCase):
    def setUp(self):
        self.h = Harness()

    def tearDown(self):
        self.h.close()

    def test_torch_notebook_killed_after_every_cell(self):
        want = live(self.h, TORCH, TORCH_CHECK)
        self.assertFalse(want.startswith("ERROR"), want)
        got, restore = killed_after_every_cell(self.h, TORCH, TORCH_CHECK)
        self.assertEqual(got, want)
        rec = {r["name"]: r for r in restore["replay"]["recomputed"]}
        self.assertTrue({"output", "loss"} <= set(rec), restore["replay"])
        # Each was checked against the fingerprint the checkpoint saved of it, data included.
        for n in ("output", "loss"):
            self.assertEqual(rec[n]["verified"], "type, shape, dtype, requires_grad, grad_fn, data", rec[n])

    def test_torch_notebook_without_replay_loses_the_graph(self):
        """The same checkpoint restored with replay switched off: output is gone, cell 4 fails (the
        test above fails the same way when replay does nothing)."""
        out = self.h.kernel([{"run": c} for c in TORCH[:3]] + [{"checkpoint": True}])
        out = self.h.kernel([{"run": TORCH[3]}], out["steps"][-1]["manifest"], replay=False)
        self.assertTrue(out["steps"][0].startswith("ERROR NameError"), out["steps"][0])
        self.assertEqual(out["restore"]["replay"], {"recomputed": [], "not_replayed": []})

    def test_generator_advanced_over_turns(self):
        want = live(self.h, GEN, "(next(gen), a, b, c)")
        got, restore = killed_after_every_cell(self.h, GEN, "(next(gen), a, b, c)")
        self.assertEqual(got, want)
        self.assertEqual(want, "(9, 0, 1, 4)")
        rec = restore["replay"]["recomputed"]
        self.assertEqual([r["name"] for r in rec], ["gen"], restore["replay"])
        self.assertEqual(rec[0]["turns"], [1, 2, 3, 4])
        self.assertEqual(rec[0]["verified"], "type, code, finished, at, locals")

    def test_turns_are_the_sessions_numbers(self):
        """The report names turns as the session numbers them (the kernel's execution_count), not by
        the agent's own count: here turn 3 was lost with a dead kernel (no checkpoint has it) and
        the session went on at 4, so the generator's turns are 1, 2, 4, 5."""
        got, restore = killed_after_every_cell(self.h, GEN, "(next(gen), a, b, c)", numbers=[1, 2, 4, 5, 6])
        self.assertEqual(got, "(9, 0, 1, 4)")
        rec = restore["replay"]["recomputed"]
        self.assertEqual([(r["name"], r["turn"], r["turns"]) for r in rec], [("gen", 1, [1, 2, 4, 5])], rec)
        # A refusal names the session's turn too.
        manifest = self._killed(["x = 1", "g = (i for i in range(3))\nopen('f.txt', 'w')"], numbers=[7, 9])
        out = self.h.kernel([{"run": "'g' in dir()"}], manifest, execution_count=10)
        nr = {r["name"]: r["reason"] for r in out["restore"]["replay"]["not_replayed"]}
        self.assertTrue(nr["g"].startswith("not replayed: turn 9 is not safe to run again"), nr)

    def _not_replayed(self, cells, name):
        out = None
        manifest = None
        for cell in cells:
            out = self.h.kernel([{"run": cell}, {"checkpoint": True}], manifest)
            manifest = out["steps"][1]["manifest"]
        out = self.h.kernel([{"run": "%r in dir()" % name}], manifest)
        self.assertEqual(out["steps"][0], "False")
        nr = {r["name"]: r["reason"] for r in out["restore"]["replay"]["not_replayed"]}
        return nr[name]

    def test_a_turn_that_writes_a_file_is_never_replayed(self):
        reason = self._not_replayed(["open('out.txt', 'w').write('x')\ng = (i for i in range(3))"], "g")
        self.assertIn("writes files", reason)
        self.assertEqual(sorted(os.listdir(self.h.work)), ["out.txt"])

    def test_unseeded_randomness_and_shell_are_never_replayed(self):
        reason = self._not_replayed(["import numpy as np\nr = np.random.default_rng()\ng = (r.random() for _ in range(3))"], "g")
        self.assertIn("unseeded", reason)
        reason = self._not_replayed(["import os\nos.system('true')\ng = (i for i in range(3))"], "g")
        self.assertIn("shell command", reason)

    def test_budget(self):
        cells = ["import time\ntime.sleep(0.3)\ng = (i for i in range(5))"]
        manifest = None
        for cell in cells:
            out = self.h.kernel([{"run": cell}, {"checkpoint": True}], manifest)
            manifest = out["steps"][1]["manifest"]
        # time.sleep reads no clock, but 300 ms of recorded turn time is over a 50 ms budget
        out = self.h.kernel([{"run": "'g' in dir()"}], manifest, replay_budget_ms=50)
        self.assertEqual(out["steps"][0], "False")
        reason = out["restore"]["replay"]["not_replayed"][0]["reason"]
        self.assertIn("over the replay budget", reason)
        self.assertLess(out["restore"]["timings"]["load_ms"], 300)

    def test_a_replay_that_does_not_reproduce_is_refused(self):
        # The layer's weights come from the generator: the state before turn 2 is saved, so the
        # replay reproduces them; a turn that re-seeds from the clock cannot be replayed at all, and
        # one whose input changed in place since is refused rather than bound.
        cells = ["data = [1, 2]", "g = (x for x in data)", "data.append(3)"]
        reason = self._not_replayed(cells, "g")
        self.assertIn("data", reason)

    def _killed(self, cells, numbers=None):
        """Runs cells one per process, checkpointing each (numbered 1, 2, ... or numbers)."""
        manifest = None
        for i, cell in enumerate(cells):
            out = self.h.kernel([{"run": cell}, {"checkpoint": True}], manifest,
                                execution_count=numbers[i] if numbers else i + 1)
            self.assertFalse(str(out["steps"][0]).startswith("ERROR"), out["steps"][0])
            manifest = out["steps"][1]["manifest"]
        return manifest

    def test_a_rebuilt_tensor_whose_input_file_changed_is_not_bound(self):
        """The turn that made out reads a file (safe to run again), but the file changed after the
        checkpoint: the replay makes another tensor, which the saved fingerprint catches."""
        path = os.path.join(self.h.work, "w.txt")
        with open(path, "w") as f:
            f.write("1 2")
        cells = ["import torch",
                 "w = torch.tensor([[float(v) for v in open('w.txt').read().split()]], requires_grad=True)\nout = (w * 2).T"]
        manifest = self._killed(cells)
        fp = [g for g in manifest["groups"] if g["n"] == ["@carryover.fp.out"]]
        self.assertEqual(len(fp), 1, manifest["groups"])
        # Same file: rebuilt and verified.
        out = self.h.kernel([{"run": "out.tolist(), out.grad_fn is not None"}], manifest)
        self.assertEqual(out["steps"][0], "([[2.0], [4.0]], True)")
        self.assertEqual([r["name"] for r in out["restore"]["replay"]["recomputed"]], ["out"])
        # Other values, same shape: refused, data named.
        with open(path, "w") as f:
            f.write("1 3")
        out = self.h.kernel([{"run": "'out' in dir()"}], manifest)
        self.assertEqual(out["steps"][0], "False")
        nr = {r["name"]: r["reason"] for r in out["restore"]["replay"]["not_replayed"]}
        self.assertEqual(nr["out"], "not replayed: rebuilt out differs from the saved one: its data (same shape and "
                         "dtype, other values)")
        # Another shape: refused, shapes named (rebuilt, then saved).
        with open(path, "w") as f:
            f.write("1")
        out = self.h.kernel([{"run": "'out' in dir()"}], manifest)
        self.assertEqual(out["steps"][0], "False")
        nr = {r["name"]: r["reason"] for r in out["restore"]["replay"]["not_replayed"]}
        self.assertEqual(nr["out"], "not replayed: rebuilt out differs from the saved one: shape (1, 1) vs (2, 1)")

    def test_a_change_the_safety_analysis_cannot_see_is_caught(self):
        """scale changes through a function defined before the turn that read it: no later turn
        names scale, so the plan's input looks unchanged; the replay reads the new value."""
        cells = ["import torch\nscale = [2.0]\ndef bump():\n    scale[0] = 3.0",
                 "t = torch.ones(2, requires_grad=True)\nout = t * scale[0]",
                 "bump()"]
        manifest = self._killed(cells)
        out = self.h.kernel([{"run": "'out' in dir(), scale"}], manifest)
        self.assertEqual(out["steps"][0], "(False, [3.0])")
        nr = {r["name"]: r["reason"] for r in out["restore"]["replay"]["not_replayed"]}
        self.assertIn("rebuilt out differs from the saved one: its data", nr["out"])

    def test_a_generator_advanced_out_of_sight_is_caught(self):
        """A generator advanced through a function (the turn names step, not gen): the replay of the
        turns that name gen leaves it one item behind; its saved position says so."""
        cells = ["def step():\n    return next(gen)",
                 "gen = (i * i for i in range(10))",
                 "a = next(gen)",
                 "b = step()"]
        manifest = self._killed(cells)
        out = self.h.kernel([{"run": "'gen' in dir()"}], manifest)
        self.assertEqual(out["steps"][0], "False")
        nr = {r["name"]: r["reason"] for r in out["restore"]["replay"]["not_replayed"]}
        self.assertEqual(nr["gen"], "not replayed: rebuilt gen differs from the saved one: local .0 range(0, 10, 1) "
                         "at 1 vs range(0, 10, 1) at 2")

    def test_a_snapshot_not_committed_is_not_replayed_twice(self):
        """A checkpoint Go did not commit gives its cells back to the next one: they are ONE history
        entry then, not two (the generator would be replayed one step too far)."""
        steps = [{"run": "gen = (i for i in range(10))"}, {"checkpoint": True},
                 {"run": "next(gen)"}, {"checkpoint": True, "fail_commit": True},
                 {"run": "next(gen)"}, {"checkpoint": True}]
        out = self.h.kernel(steps, execution_count=1)
        m = out["steps"][-1]["manifest"]
        self.assertEqual([g["n"][0] for g in m["groups"] if g["n"][0].startswith("@carryover.history.")],
                         ["@carryover.history.e000000001", "@carryover.history.e000000002"])
        back = self.h.kernel([{"run": "next(gen)"}], m, execution_count=4)
        self.assertEqual(back["steps"], ["2"], back["restore"]["replay"])
        self.assertEqual([(r["name"], r["turns"]) for r in back["restore"]["replay"]["recomputed"]], [("gen", [1, 2])])

    def test_a_snapshot_interrupted_half_way_is_taken_again_whole(self):
        """A user's interrupt meant for the cell that just ended can land in the turn's snapshot; Go
        then takes it again (persistence.ErrInterrupted). That is sound only if the second snapshot
        still sees everything the turn changed: a write deep in a record, a generator advanced."""
        steps = [{"run": "rows = [{'id': i, 'v': [i]} for i in range(3)]\ngen = (i for i in range(10))"}, {"checkpoint": True},
                 {"run": "rows[1]['v'][0] = -1\nnext(gen)"}, {"checkpoint": True, "interrupt": True},
                 {"checkpoint": True}]
        out = self.h.kernel(steps, execution_count=1)
        self.assertEqual(out["steps"][3], "INTERRUPTED")
        back = self.h.kernel([{"run": "(rows[1], next(gen))"}], out["steps"][-1]["manifest"], execution_count=3)
        self.assertEqual(back["steps"], ["({'id': 1, 'v': [-1]}, 1)"], back["restore"]["replay"])

    def test_fingerprints_cost_nothing_when_unchanged_or_nothing_is_skipped(self):
        out = self.h.kernel([{"run": "x = 1"}, {"checkpoint": True}])
        names = [n for g in out["steps"][1]["manifest"]["groups"] for n in g["n"]]
        self.assertFalse([n for n in names if n.startswith("@carryover.fp.")], names)
        steps = [{"run": "import torch\nt = torch.ones(3, requires_grad=True)\nout = t * 2"}, {"checkpoint": True},
                 {"run": "y = 2"}, {"checkpoint": True}]
        out = self.h.kernel(steps)
        refs = [[g["r"] for g in out["steps"][i]["manifest"]["groups"] if g["n"] == ["@carryover.fp.out"]] for i in (1, 3)]
        self.assertEqual(len(refs[0]), 1)
        self.assertEqual(refs[0], refs[1])  # the same descriptor: its chunks are not written again
        chunks = {c["h"] for c in out["steps"][3]["result"]["chunks"]}
        self.assertNotIn(refs[1][0], chunks)



class FingerprintTest(unittest.TestCase):
    """fingerprint.py in process: what is compared, and its bounds."""

    def test_tensor(self):
        import torch

        from carryover_agent import fingerprint as fp

        t = torch.ones(2, 1, requires_grad=True)
        a = fp.take(t * 2)
        self.assertEqual(fp.differs(a, fp.take(t * 2)), "")
        self.assertEqual(fp.compared(a), "type, shape, dtype, requires_grad, grad_fn, data")
        self.assertEqual(fp.differs(a, fp.take(t * 3)), "its data (same shape and dtype, other values)")
        self.assertEqual(fp.differs(a, fp.take(t + t)), "grad_fn AddBackward0 vs MulBackward0")
        self.assertEqual(fp.differs(a, fp.take(torch.ones(1, 1, requires_grad=True) * 2)), "shape (1, 1) vs (2, 1)")
        self.assertEqual(fp.differs(a, fp.take((t * 2).detach())), "requires_grad 0 vs 1")

    def test_bounds(self):
        import numpy as np
        import torch

        from carryover_agent import fingerprint as fp

        big = torch.zeros(fp.DATA_MAX // 4 + 1)
        a = fp.take(big)
        self.assertTrue(dict(a)["data"].startswith("not hashed"), a)
        self.assertEqual(fp.compared(a), "type, shape, dtype, requires_grad, grad_fn")
        # Data is not compared when not hashed: only the rest must match.
        self.assertEqual(fp.differs(a, fp.take(big + 1)), "")
        # The snapshot's total: past it, values are fingerprinted without their data.
        budget = fp._Budget(fp.DATA_MAX)
        first = fp.take(np.zeros(fp.DATA_MAX // 8), budget)
        second = fp.take(np.zeros(8), budget)
        self.assertFalse(dict(first)["data"].startswith("not hashed"))
        self.assertTrue(dict(second)["data"].startswith("not hashed"), second)

    def test_holder_and_others(self):
        import threading

        import numpy as np

        from carryover_agent import fingerprint as fp

        class Holder:
            def __init__(self, n):
                self.lock = threading.Lock()
                self.w = np.arange(n)

        a = fp.take(Holder(3))
        self.assertEqual(fp.differs(a, fp.take(Holder(3))), "")
        self.assertEqual(fp.differs(a, fp.take(Holder(4))), "w.shape (4,) vs (3,)")
        self.assertEqual(fp.take(threading.Lock()), (("type", "_thread.lock"),))
        self.assertEqual(fp.differs(fp.take(threading.Lock()), fp.take(threading.RLock())),
                         "type _thread.RLock vs _thread.lock")


if __name__ == "__main__":
    unittest.main()
