"""Restore fidelity: what a checkpoint brings back must be what the live kernel had, or be named with a
reason. Each test runs real kernels (new /usr/bin/python3 processes through agent_harness.py) with
the real libraries, and compares a restored kernel with the live one.

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py' (go test runs it too)."""

import json
import os
import unittest

from test_agent import Harness

# The libraries are required (make deps installs them: python3-torch, -sklearn, -scipy, -networkx,
# -sympy, -pil, -statsmodels, -astropy), never skipped.


def names_of(manifest):
    return {n for g in manifest["groups"] for n in g["n"]}


class FidelityTest(unittest.TestCase):
    def setUp(self):
        self.h = Harness()

    def tearDown(self):
        self.h.close()

    def live_then_restored(self, setup, probe):
        """Runs setup, checkpoints, then probe in the live kernel; then probe in a kernel restored from
        that checkpoint. Returns (live answer, restored answer, checkpoint result, restore answer)."""
        out = self.h.kernel([{"run": setup}, {"checkpoint": True}, {"run": probe}])
        self.assertNotIn("ERROR", out["steps"][0], out["steps"][0])
        cp = out["steps"][1]
        back = self.h.kernel([{"run": probe}], manifest=cp["manifest"])
        return out["steps"][2], back["steps"][0], cp, back["restore"]

    def chain(self, cells):
        """A kernel killed after every cell: each cell runs in a fresh kernel restored from the previous
        cell's checkpoint. Returns the last checkpoint's manifest and every checkpoint's skipped."""
        manifest, skipped = None, []
        for c in cells:
            out = self.h.kernel([{"run": c}, {"checkpoint": True}], manifest=manifest)
            self.assertNotIn("ERROR", out["steps"][0], c)
            if manifest is not None:
                self.assertEqual(out["restore"]["failed"], [], c)
            manifest = out["steps"][1]["manifest"]
            skipped.extend(out["steps"][1]["result"]["skipped"])
        return manifest, skipped

    def test_global_random_state_continues(self):
        setup = ("import random, numpy as np\nrandom.seed(7); np.random.seed(42)\n"
                 "random.random(); np.random.rand(3); np.random.randn()\n"  # randn leaves a cached gaussian
                 "rng = np.random.default_rng(3); rng.random()\nr = random.Random(5); r.random()\n")
        probe = "(random.random(), random.gauss(0, 1), list(np.random.rand(2)), np.random.randn(), rng.random(), r.random())"
        # torch's default generator and a torch.Generator variable
        setup += "import torch\ntorch.manual_seed(1); torch.rand(2)\ntg = torch.Generator().manual_seed(9); torch.rand(1, generator=tg)\n"
        probe = probe[:-1] + ", torch.rand(2).tolist(), torch.rand(1, generator=tg).tolist())"
        live, restored, cp, rs = self.live_then_restored(setup, probe)
        self.assertEqual(rs["failed"], [])
        self.assertEqual(cp["result"]["skipped"], [])
        self.assertEqual(restored, live)
        # State is no variable: not listed among the saved names, but in the manifest as "state" groups.
        kinds = {g["n"][0]: g["k"] for g in cp["manifest"]["groups"]}
        self.assertEqual(kinds.get("@random"), "state")
        self.assertEqual(kinds.get("@numpy.random"), "state")
        self.assertNotIn("@random", cp["result"]["saved"])
        self.assertNotIn("@random", rs["restored"])

    def test_unchanged_state_writes_nothing(self):
        out = self.h.kernel([{"run": "import numpy as np\nnp.random.seed(1)\nx = 1"}, {"checkpoint": True},
                             {"run": "y = 2"}, {"checkpoint": True}, {"run": "np.random.rand()"}, {"checkpoint": True}])
        second, third = out["steps"][3], out["steps"][5]
        self.assertEqual(second["result"]["saved"], ["y"])
        self.assertLess(second["written"], 1024, second["result"]["chunks"])
        self.assertEqual(third["result"]["saved"], [])
        self.assertGreater(third["written"], 1000)  # the numpy generator's 2.5 KB state moved

    def test_silent_differences_restored(self):
        setup = r'''
import numpy as np, matplotlib
matplotlib.use("Agg")
from IPython.core.magic import register_cell_magic, register_line_magic
with open("notes.txt", "w") as f:
    f.write("hello")
log = open("log.txt", "w")
log.write("one\n")
@register_cell_magic
def shout(line, cell):
    return cell.upper() + line
@register_line_magic
def twice(line):
    return line * 2
matplotlib.rcParams["lines.linewidth"] = 7
matplotlib.rcParams["axes.titlesize"] = "x-large"
a64 = np.zeros(4)
ints = np.arange(3, dtype=np.int32)
get_ipython().run_line_magic("load_ext", "autoreload")
'''
        probe = ("(f.name, f.mode, f.closed, type(f).__name__, log.name, log.mode, log.closed, log.tell(), "
                 "get_ipython().run_cell_magic('shout', '!', 'abc'), get_ipython().run_line_magic('twice', 'xy'), "
                 "matplotlib.rcParams['lines.linewidth'], matplotlib.rcParams['axes.titlesize'], "
                 "a64.dtype is np.dtype('float64'), np.asarray(a64, dtype=np.float64) is a64, ints.dtype is np.dtype(np.int32), "
                 "'autoreload' in get_ipython().magics_manager.magics['line'])")
        live, restored, cp, rs = self.live_then_restored(setup, probe)
        self.assertEqual(rs["failed"], [])
        self.assertEqual(cp["result"]["skipped"], [])
        self.assertEqual(restored, live)
        self.assertIn("'notes.txt', 'w', True", live)
        # the file reopened for writing was not truncated, and keeps writing where it was
        back = self.h.kernel([{"run": "log.write('two\\n'); log.close(); open('log.txt').read()"}], manifest=cp["manifest"])
        self.assertEqual(back["steps"][0], repr("one\ntwo\n"))

    def test_autograd_graph_reported_grad_kept(self):
        setup = ("import torch\ntorch.manual_seed(0)\nw = torch.randn(3, requires_grad=True)\n"
                 "loss = (w * 2).sum()\nkeep = {'loss': loss, 'n': 1}\nloss.backward()\nval = loss.detach()\n")
        probe = "(w.grad.tolist(), val.item(), w.is_leaf, w.requires_grad)"
        live, restored, cp, rs = self.live_then_restored(setup, probe)
        skipped = {s["name"]: s["reason"] for s in cp["result"]["skipped"]}
        self.assertEqual(set(skipped), {"loss", "keep"})
        self.assertIn("grad_fn=SumBackward0", skipped["loss"])
        self.assertIn("autograd graph", skipped["keep"])
        self.assertNotIn("loss", names_of(cp["manifest"]))
        self.assertEqual(rs["failed"], [])
        self.assertEqual(restored, live)  # w.grad came back

    def test_views_stay_views(self):
        setup = ("import numpy as np, pandas as pd\nbig = np.arange(100000.0)\nv = big[10:20]\nev = big[::2]\n"
                 "m = big.reshape(1000, 100)\ncol = m[:, 3]\n"
                 "df = pd.DataFrame({'a': np.arange(5.0), 'b': np.arange(5.0)})\ns = df['a']\n")
        probe = ("(v.base is big, ev.base is big, m.base is big, col.base is big, np.shares_memory(s.values, df.values), "
                 "float(v.sum()), float(ev.sum()), float(col.sum()))")
        live, restored, cp, rs = self.live_then_restored(setup, probe)
        self.assertEqual(rs["failed"], [])
        self.assertTrue(live.startswith("(True, True, True, True, True"), live)
        self.assertEqual(restored, live)
        back = self.h.kernel([{"run": "big[12] = -1; df.iloc[0, 0] = 9.0; (v[2], m[0, 12], s.iloc[0] == df.iloc[0, 0])"}],
                             manifest=cp["manifest"])
        self.assertEqual(back["steps"][0], "(-1.0, -1.0, True)")

    def test_sharing_across_turns_killed_every_cell(self):
        cells = [
            "import numpy as np\nnp.random.seed(0)\nX = np.random.rand(20000, 4)\ny = (X[:, 0] > 0.5).astype(int)",
            "data = {'train': X}",
            "from sklearn.neighbors import KNeighborsClassifier\nknn = KNeighborsClassifier(3).fit(data['train'], y)",
        ]
        checks = "(knn._fit_X is X, knn._fit_X is data['train'], list(knn.predict(X[:5])) == list(y[:5]))"
        # a model over BIG_GRAPH and an optimizer made in a later turn
        cells += [
            "import torch\ntorch.manual_seed(0)\nnet = torch.nn.Sequential(torch.nn.Linear(4, 1200), torch.nn.Linear(1200, 1000), torch.nn.Linear(1000, 1))",
            "def make_opt():\n    return torch.optim.SGD(net.parameters(), lr=0.1)\nopt = make_opt()",
            "Xt = torch.tensor(X[:64], dtype=torch.float32)\nopt.zero_grad(); net(Xt).pow(2).mean().backward(); opt.step()",
        ]
        checks = checks[:-1] + (", opt.param_groups[0]['params'][0] is net[0].weight, "
                                "(lambda before: (opt.zero_grad(), net(Xt).pow(2).mean().backward(), opt.step(), "
                                "bool((net[0].weight != before).any()))[-1])(net[0].weight.detach().clone()))")
        manifest, skipped = self.chain(cells)
        self.assertEqual(skipped, [])
        back = self.h.kernel([{"run": checks}], manifest=manifest)
        self.assertEqual(back["restore"]["failed"], [])
        want = "(True, True, True, True, True)"
        self.assertEqual(back["steps"][0], want)

    def test_restored_group_merges_with_new_sharer(self):
        # A cell that reaches a restored object without naming it (here through user_ns) must still
        # merge the new object with the restored group: the group's ids come from the unpickler's memo.
        first = self.h.kernel([{"run": "import numpy as np\nX = np.ones((300, 300))\nother = [1]"}, {"checkpoint": True}])
        m1 = first["steps"][1]["manifest"]
        second = self.h.kernel([{"run": "holder = {'x': get_ipython().user_ns['X']}"}, {"checkpoint": True}], manifest=m1)
        m2 = second["steps"][1]["manifest"]
        self.assertIn(("X", "holder"), {tuple(g["n"]) for g in m2["groups"]})
        back = self.h.kernel([{"run": "holder['x'] is X"}], manifest=m2)
        self.assertEqual(back["steps"][0], "True")

    def test_huge_graph_keeps_its_sharing_across_a_restore(self):
        # Two graphs over BIG_GRAPH: records holding no array (the descriptor says so, "m": 0, and the
        # restore skips the unpickler's memo), and records with an array deep inside (no "m": the
        # restore finds the array through the memo). A later turn's name for a record, or for that
        # array, reached without naming the container (the restored group's ids alone can tell), must
        # merge with its restored group as in a kernel never restored.
        setup = ("import numpy as np\n"
                 "class Rec:\n    def __init__(self, i):\n        self.id, self.tags = i, ['a', str(i)]\n"
                 "recs = [Rec(i) for i in range(150_000)]\n"
                 "deep = [Rec(i) for i in range(150_000)]\n"
                 "deep[7].v = np.arange(5.0)")
        first = self.h.kernel([{"run": setup}, {"checkpoint": True}])
        self.assertNotIn("ERROR", first["steps"][0], first["steps"][0])
        m1 = first["steps"][1]["manifest"]
        desc = {}
        for g in (g for g in m1["groups"] if "r" in g):
            with open(os.path.join(self.h.store, g["r"]), "rb") as f:
                desc[tuple(g["n"])] = json.loads(f.read())
        self.assertEqual(desc[("recs",)].get("m"), 0, desc[("recs",)].keys())
        self.assertNotIn("m", desc[("deep",)])
        second = self.h.kernel([{"run": "ns = get_ipython().user_ns\nr5 = ns['recs'][5]; v = ns['deep'][7].v\ndel ns"}, {"checkpoint": True}], manifest=m1)
        self.assertEqual(second["restore"]["failed"], [])
        m2 = second["steps"][1]["manifest"]
        self.assertTrue({("r5", "recs"), ("deep", "v")} <= {tuple(g["n"]) for g in m2["groups"]}, m2["groups"])
        back = self.h.kernel([{"run": "(r5 is recs[5], v is deep[7].v, float(v.sum()), len(recs))"}], manifest=m2)
        self.assertEqual(back["steps"][0], "(True, True, 10.0, 150000)")

    def test_custom_reduce_that_loses_data_is_reported(self):
        setup = r'''
class Acc:
    def __init__(self):
        self.total, self.label = 0, "acc"
    def __reduce__(self):
        return (Acc, ())  # forgets total
acc = Acc(); acc.total = 5
class Money:
    def __init__(self, cents):
        self.cents = cents
    def __eq__(self, o):
        return isinstance(o, Money) and o.cents == self.cents
    def __reduce__(self):
        return (Money, (0,))  # always zero
price = Money(250)
class Pt:
    def __init__(self, x):
        self.x = x
    def __reduce__(self):
        return (Pt, (self.x,))  # correct: must not be reported
pt = Pt(3)
pair = [acc, 1]
'''
        out = self.h.kernel([{"run": setup}, {"checkpoint": True}, {"run": "y = 2"}, {"checkpoint": True}])
        cp = out["steps"][1]
        skipped = {s["name"]: s["reason"] for s in cp["result"]["skipped"]}
        self.assertEqual(set(skipped), {"acc", "price"}, skipped)
        self.assertIn("'total'", skipped["acc"])
        self.assertIn("unequal", skipped["price"])
        # saved all the same (it is what pickling can do), and still named at the next checkpoints
        self.assertTrue({"acc", "price", "pt", "pair"} <= names_of(cp["manifest"]))
        later = out["steps"][3]["result"]
        self.assertEqual({s["name"] for s in later["skipped"]}, {"acc", "price"})
        back = self.h.kernel([{"run": "x = 1"}, {"checkpoint": True}], manifest=cp["manifest"])
        self.assertEqual({s["name"] for s in back["steps"][1]["result"]["skipped"]}, {"acc", "price"})

    def test_memmap_reopened_on_its_file(self):
        setup = ("import numpy as np, os\nmm = np.memmap('m.dat', dtype='float64', mode='w+', shape=(1000,))\n"
                 "mm[3] = 7; mm.flush()\npart = mm[10:20]\nro = np.memmap('m.dat', dtype='float64', mode='r', shape=(10,))\n"
                 "import mmap\nraw = mmap.mmap(-1, 4096)\ncow = np.memmap('m.dat', dtype='float64', mode='c', shape=(4,))\n")
        probe = ("(type(mm).__name__, os.path.basename(mm.filename), mm.mode, float(mm[3]), np.shares_memory(part, mm), "
                 "part.base is mm, ro.mode, ro.flags.writeable)")
        live, restored, cp, rs = self.live_then_restored(setup, probe)
        self.assertEqual(rs["failed"], [])
        self.assertEqual(restored, live)
        skipped = {s["name"]: s["reason"] for s in cp["result"]["skipped"]}
        self.assertEqual(set(skipped), {"raw", "cow"})  # a plain mmap object is named, not silently dropped
        self.assertIn("mmap", skipped["raw"])
        self.assertTrue(skipped["cow"].startswith("saved, but np.memmap of"), skipped["cow"])  # copy-on-write map
        back = self.h.kernel([{"run": "part[0] = 9; mm.flush(); float(np.fromfile('m.dat')[10])"}], manifest=cp["manifest"])
        self.assertEqual(back["steps"][0], "9.0")

    def test_library_objects_exact(self):
        setup = r'''
import numpy as np
np.random.seed(1)
X = np.random.rand(60, 3); y = X @ [1.0, 2.0, -1.0] + 0.1
from sklearn.linear_model import LinearRegression
from sklearn.ensemble import RandomForestClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.pipeline import make_pipeline
lin = LinearRegression().fit(X, y)
rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y > y.mean())
pipe = make_pipeline(StandardScaler(), LinearRegression()).fit(X, y)
import scipy.sparse as sp, scipy.stats as st
S = sp.random(50, 50, density=0.1, format="csr", random_state=1)
dist = st.norm(2, 3)
import networkx as nx
G = nx.karate_club_graph()
import sympy
xs = sympy.symbols("x")
expr = sympy.sin(xs) ** 2 + sympy.exp(xs)
from PIL import Image
img = Image.new("RGB", (20, 10), (10, 20, 30)); img.putpixel((3, 4), (200, 0, 0))
import statsmodels.api as sm
ols = sm.OLS(y, sm.add_constant(X)).fit()
import astropy.units as u
from astropy.table import Table
q = 3.5 * u.km / u.s
tab = Table({"a": [1, 2], "b": [3.0, 4.0]})
'''
        probe = ("(lin.predict(X[:3]).round(9).tolist(), rf.predict(X[:6]).tolist(), pipe.predict(X[:2]).round(9).tolist(), "
                 "abs(S).sum().round(9), dist.cdf(1.0).round(12), sorted(G.degree())[:3], G.number_of_edges(), "
                 "str(sympy.diff(expr, xs)), img.getpixel((3, 4)), img.size, img.mode, ols.params.round(9).tolist(), "
                 "str(q.to(u.m / u.s)), tab['b'].sum(), list(tab.colnames))")
        live, restored, cp, rs = self.live_then_restored(setup, probe)
        self.assertEqual(cp["result"]["skipped"], [])
        self.assertEqual(rs["failed"], [])
        self.assertNotIn("ERROR", live)
        self.assertEqual(restored, live)


if __name__ == "__main__":
    unittest.main()
