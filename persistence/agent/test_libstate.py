"""Library settings and module objects across restores (issue 41), one row each: the row's cell sets
a setting (or binds a name to a module's object), a checkpoint is taken, and the probe must give the
same answer in a new process restored from it (a kernel's death, a wake, a fork: the same restore
op) and after a checkpoint restore into the live kernel that changed the setting since (the row's
"undo" cell). Each row failed before: the value came back as the library's default, or the name
as a copy of the module's object."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from test_agent import Harness  # noqa: E402

IMPORTS = ("import sys, os, random, logging, warnings, decimal\nimport numpy as np, pandas as pd\n"
           "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
           "import scipy.stats, torch, sklearn\nsys.path.insert(0, os.getcwd())")

# (row, cell that sets it, cell that changes it again after the checkpoint, probe)
ROWS = [
    ("pandas option", "pd.set_option('display.max_rows', 7)", "pd.set_option('display.max_rows', 9)",
     "pd.get_option('display.max_rows')"),
    ("numpy print options", "np.set_printoptions(precision=3)", "np.set_printoptions(precision=5)",
     "np.get_printoptions()['precision']"),
    ("numpy seterr", "np.seterr(divide='ignore')", "np.seterr(divide='raise')", "np.geterr()['divide']"),
    ("matplotlib style and rcParams", "plt.style.use('ggplot'); matplotlib.rcParams['lines.linewidth'] = 5",
     "plt.style.use('default')", "(matplotlib.rcParams['lines.linewidth'], matplotlib.rcParams['axes.facecolor'])"),
    ("logging level", "logging.getLogger('mylog').setLevel(logging.ERROR)",
     "logging.getLogger('mylog').setLevel(logging.DEBUG)", "logging.getLogger('mylog').level"),
    ("logging handler and formatter",
     "logging.getLogger('app').addHandler(logging.StreamHandler(sys.stdout))\n"
     "logging.getLogger('app').handlers[0].setFormatter(logging.Formatter('%(name)s| %(message)s'))",
     "logging.getLogger('app').handlers.clear()",
     "[(type(h).__name__, h.stream is sys.stdout, h.formatter._fmt) for h in logging.getLogger('app').handlers]"),
    ("warnings filter", "warnings.filterwarnings('ignore', message='zzz')", "warnings.resetwarnings()",
     "any(f[0] == 'ignore' and f[1] is not None and f[1].pattern == 'zzz' for f in warnings.filters)"),
    ("sys.path entry", "sys.path.append('/tmp/carryover-extra')", "sys.path.remove('/tmp/carryover-extra')",
     "'/tmp/carryover-extra' in sys.path"),
    ("recursion limit", "sys.setrecursionlimit(4321)", "sys.setrecursionlimit(5000)", "sys.getrecursionlimit()"),
    ("decimal context", "decimal.getcontext().prec = 5", "decimal.getcontext().prec = 9", "decimal.getcontext().prec"),
    ("torch default dtype", "torch.set_default_dtype(torch.float64)", "torch.set_default_dtype(torch.float16)",
     "str(torch.get_default_dtype())"),
    ("torch threads", "torch.set_num_threads(3)", "torch.set_num_threads(1)", "torch.get_num_threads()"),
    ("torch deterministic", "torch.use_deterministic_algorithms(True)", "torch.use_deterministic_algorithms(False)",
     "torch.are_deterministic_algorithms_enabled()"),
    ("sklearn config", "sklearn.set_config(transform_output='pandas')", "sklearn.set_config(transform_output='default')",
     "sklearn.get_config()['transform_output']"),
    ("from scipy.stats import norm", "from scipy.stats import norm", "norm = 1", "norm is scipy.stats.norm"),
    ("a frozen distribution", "d = scipy.stats.norm(2, 3)", "d = 1", "d.dist._random_state is np.random.mtrand._rand"),
    ("from matplotlib import rcParams", "from matplotlib import rcParams", "rcParams = 1",
     "rcParams is matplotlib.rcParams"),
    ("from os import environ", "from os import environ", "environ = 1", "environ is os.environ"),
    ("from random import randint", "from random import randint", "randint = 1", "randint.__self__ is random._inst"),
    ("numpy's global generator", "rng = np.random.mtrand._rand", "rng = 1", "rng is np.random.mtrand._rand"),
    ("a module's registry", "from mymod import registry", "registry = 1",
     "(registry is __import__('mymod').registry, registry)"),
]

MODULES = {"mymod.py": "registry = {'a': 1}\n", "mymod2.py": "cache = {}\n"}
# The module object the session changes: it comes back as a copy, with its value, named in failed.
CHANGED = "from mymod2 import cache\ncache['b'] = 2"
DRAW = "np.random.seed(0); norm.rvs(size=5).tolist()"


class LibStateTest(unittest.TestCase):
    def setUp(self):
        self.h = Harness()
        for name, src in MODULES.items():
            with open(os.path.join(self.h.work, name), "w") as f:
                f.write(src)

    def tearDown(self):
        self.h.close()

    def test_table(self):
        """All rows in one session: each probe after a restore in a new process and after a checkpoint
        restore into the live kernel must equal the live answer, row by row. Then: norm's draws
        after a restore equal the live kernel's, the changed module object comes back as a copy
        (named), and a turn that changes no setting reuses every setting's pickle."""
        steps = [{"run": IMPORTS}] + [{"run": r[1]} for r in ROWS] + [{"run": CHANGED}]
        steps += [{"run": r[3]} for r in ROWS] + [{"checkpoint": True}]
        cp = len(steps) - 1
        steps += [{"run": "x = 1"}, {"checkpoint": True}]
        steps += [{"run": r[2]} for r in ROWS] + [{"restore": cp}] + [{"run": r[3]} for r in ROWS]
        steps += [{"run": DRAW}]
        out = self.h.kernel(steps)["steps"]
        live = out[cp - len(ROWS):cp]
        self.assertNotIn("ERROR", " ".join(live))
        back = out[cp + 3 + len(ROWS) + 1:-1]
        restore = out[cp + 3 + len(ROWS)]
        fresh = self.h.kernel([{"run": r[3]} for r in ROWS] + [{"run": DRAW}, {"run": "(cache, cache is __import__("
                                                                              "'mymod2').cache)"}],
                              manifest=out[cp]["manifest"])
        for i, row in enumerate(ROWS):
            with self.subTest(row=row[0]):
                self.assertEqual(fresh["steps"][i], live[i], "restored in a new process")
                self.assertEqual(back[i], live[i], "checkpoint restore into the live kernel")
        self.assertEqual(restore["failed"], [])
        self.assertEqual(fresh["steps"][-2], out[-1], "norm's draws after a restore")
        self.assertEqual(fresh["steps"][-1], "({'b': 2}, False)")
        failed = {f["name"]: f["reason"] for f in fresh["restore"]["failed"]}
        self.assertEqual(list(failed), ["cache"])
        self.assertTrue(failed["cache"].startswith("restored as a copy, not as mymod2.cache"), failed)
        refs = [{g["n"][0]: g.get("r") for g in out[i]["manifest"]["groups"]} for i in (cp, cp + 2)]
        settings = ["@sys", "@pandas.options", "@numpy.printoptions", "@numpy.seterr", "@matplotlib.rcParams",
                    "@decimal.context", "@warnings.filters", "@logging", "@torch.settings", "@sklearn.config"]
        for name in settings:
            self.assertEqual(refs[0][name], refs[1].get(name), name)

    def test_defaults_come_back(self):
        """A checkpoint taken before any setting, restored into a kernel that set them all since:
        every setting goes back to its default."""
        steps = [{"run": IMPORTS}, {"run": "d0 = " + _probes()}, {"checkpoint": True}]
        steps += [{"run": r[1]} for r in ROWS[:14]] + [{"restore": 2}, {"run": _probes()}, {"run": "d0"}]
        out = self.h.kernel(steps)["steps"]
        self.assertEqual(out[-3]["failed"], [])
        self.assertEqual(out[-2], out[-1])


def _probes():
    return "(" + ", ".join(r[3] for r in ROWS[:14]) + ",)"


if __name__ == "__main__":
    unittest.main()
