"""Live figures (carryover_agent/figures.py) and the ids a group shares by (liveids.py), in process.
The end-to-end test is persistence.TestLiveFigures (real kernel, kill -9)."""

import gc
import io
import os
import pickle
import unittest

os.environ.setdefault("MPLBACKEND", "Agg")

from carryover_agent import figures, liveids  # noqa: E402


class _T:
    def __init__(self, shared):
        self.a = [1, 2]
        self.shared = shared

    def __reduce__(self):
        return (_Back, (), {"a": self.a, "tmp": [9, [8]], "shared": self.shared})


class _Back:
    def __setstate__(self, st):
        self.__dict__.update(st)


class LiveIdsTest(unittest.TestCase):
    def test_temporaries_dropped_live_objects_kept(self):
        """The state dict a __reduce__ builds and the lists only it holds are temporaries (freed
        after the snapshot, their addresses are reused); what the value holds is not, on both sides
        (pickling and unpickling)."""
        shared = {"x": 1}
        t = _T(shared)
        p = pickle.Pickler(io.BytesIO(), protocol=5)
        p.dump(t)
        keep = p.memo.copy()
        dead = liveids.temporaries((o for _, o in keep.values()), 2)
        by = {id(o): o for _, o in keep.values()}
        self.assertEqual(sorted(repr(by[i]) for i in dead),
                         sorted([repr({"a": t.a, "tmp": [9, [8]], "shared": shared}), "[9, [8]]", "[8]"]))
        u = pickle.Unpickler(io.BytesIO(pickle.dumps(t, protocol=5)))
        back = u.load()
        objs = list(u.memo.copy().values())
        dead = liveids.temporaries(objs, 2)
        for live in (back.a, back.tmp, back.tmp[1], back.shared):  # set as attributes: they live on
            self.assertNotIn(id(live), dead)
        self.assertEqual(len(dead), 1)  # the state dict __setstate__ copied from


    def test_numpy_fixpoint_is_the_plain_one(self):
        """Large memos (a figure's) take the numpy path: it must drop exactly what the plain loop
        drops, on the pickling side and the unpickling side."""
        import matplotlib.pyplot as plt

        f, ax = plt.subplots()
        for i in range(30):
            ax.plot(range(i + 2), label=str(i))
        ax.legend()
        f.canvas.draw()
        p = pickle.Pickler(io.BytesIO(), protocol=5)
        p.dump((f, ax))
        keep = p.memo.copy()
        objs = [o for _, o in keep.values()]
        self.assertGreater(len(objs), liveids._NP_MIN)
        fast = liveids.temporaries(objs, 3)
        old, liveids._NP_MIN = liveids._NP_MIN, 1 << 62
        try:
            slow = liveids.temporaries(objs, 3)
        finally:
            liveids._NP_MIN = old
        plt.close(f)
        self.assertTrue(slow)
        self.assertEqual(fast, slow)


    def _young(self, value):
        """(what died young, what the fixpoint drops, the memo's ids) of pickling value, the way
        pickling.pickle_one does with the collector off."""
        from carryover_agent.common import _ATOMS

        gc.disable()
        try:
            before = liveids.young_begin()
            self.assertIsNotNone(before)
            p = pickle.Pickler(io.BytesIO(), protocol=5)
            p.dump(value)
            keep = p.memo.copy()
            objs = [o for _, o in keep.values()]
            fix = liveids.temporaries(objs, 3)
            memo = set(keep)
            cands = liveids.young_ids(memo, before)
            self.assertTrue(any(type(o) in _ATOMS and not gc.is_tracked(o) for o in objs))
            leaves = liveids.untracked(objs, list(map(type, objs)), tuple(_ATOMS))
            del objs, keep
            p.clear_memo()
            return liveids.died(cands, leaves), fix, memo
        finally:
            gc.enable()

    def test_young_drops_what_the_fixpoint_drops(self):
        """What dies when the pickler's memo is released (young_begin, died) is exactly what the
        fixpoint finds: on a __reduce__'s state and on a drawn figure."""
        import matplotlib.pyplot as plt

        shared = {"x": 1}
        t = _T(shared)
        young, fix, _ = self._young(t)
        self.assertEqual(len(fix), 3)  # the state dict and the two lists only it holds
        self.assertEqual(young, fix)
        for live in (t, t.a, shared):
            self.assertNotIn(id(live), young)
        f, ax = plt.subplots()
        for i in range(30):
            ax.plot(range(i + 2), label=str(i))
        ax.legend()
        f.canvas.draw()
        young, fix, memo = self._young((f, ax))
        plt.close(f)
        self.assertGreater(len(fix), 1000)
        self.assertEqual(young, fix)


class FiguresTest(unittest.TestCase):
    def setUp(self):
        import matplotlib.pyplot as plt

        self.plt = plt
        self.assertTrue(figures.hook())
        self.f, self.ax = plt.subplots()
        self.ax.plot([1, 2, 3], label="l")
        self.ax.legend()

    def tearDown(self):
        self.plt.close("all")

    def _noted(self):
        figures.begin()
        pickle.dumps((self.f, self.ax), protocol=5)
        return figures.take()

    def test_draws_are_no_change_setters_are(self):
        """Drawing (which rewrites caches and marks ticks stale) is no change; every setter is, also
        on artists whose stale flag does not reach the figure (an axis label, a legend text)."""
        noted = self._noted()
        self.assertEqual([r() for r, _, _ in noted], [self.f])
        g = type("G", (), {"names": ("f", "ax"), "figs": noted})()
        cur = {"f": self.f, "ax": self.ax}
        self.f.canvas.draw()
        self.f.savefig(io.BytesIO(), format="png", dpi=40)
        self.assertEqual(figures.changed([g], cur), set())
        for change in (lambda: self.ax.xaxis.label.set_text("x"), lambda: self.ax.get_legend().get_texts()[0].set_text("z"),
                       lambda: self.plt.title("t"), lambda: self.ax.set_xlim(0, 9), lambda: self.plt.close(self.f)):
            change()
            self.assertEqual(figures.changed([g], cur), {"f", "ax"})
            g.figs = self._noted()
            self.assertEqual(figures.changed([g], cur), set())

    def test_user_pickles_note_nothing(self):
        pickle.dumps(self.f)
        self.assertEqual(figures._COLLECT, [])


if __name__ == "__main__":
    unittest.main()
