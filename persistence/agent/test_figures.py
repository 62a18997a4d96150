"""Live figures (carryover_agent/figures.py) and the ids a group shares by (liveids.py), in process.
The end-to-end test is persistence.TestLiveFigures (real kernel, kill -9)."""

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
        """The state dict a __reduce__ builds and the lists only it holds are not ids of the group
        (freed after the snapshot, their addresses are reused); what the value holds is, on both
        sides (pickling and unpickling)."""
        shared = {"x": 1}
        t = _T(shared)
        p = pickle.Pickler(io.BytesIO(), protocol=5)
        p.dump(t)
        keep = p.memo.copy()
        ids = liveids.live((o for _, o in keep.values()), 2, (str, tuple), t)
        by = {id(o): o for _, o in keep.values()}
        got = sorted(repr(by[i]) for i in ids)
        self.assertEqual(got, sorted([repr(_Back), "[1, 2]", "{'x': 1}"]))
        u = pickle.Unpickler(io.BytesIO(pickle.dumps(t, protocol=5)))
        back = u.load()
        objs = list(u.memo.copy().values())
        ids = liveids.live(objs, 2, (str, tuple), back)
        self.assertIn(id(back.a), ids)
        self.assertIn(id(back.tmp), ids)  # set as an attribute: it lives on
        self.assertNotIn(id(back), ids)  # the root is the group's own


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
