"""Tests of the snapshot agent through the spool protocol, each "kernel" a new /usr/bin/python3 process
(forked from a zygote that has imported IPython and the agent only: zygote.py).

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py' (go test runs it too)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import zygote

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

SETUP = r'''
import numpy as np, pandas as pd, enum, abc, os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from json import dumps
from dataclasses import dataclass, field
n = 42
s = "héllo"
nested = {"a": [1, 2, {"b": (3, 4)}], "c": {"d": None}}
_cache = {"k": 1}
def add(a, b=1):
    return a + b + n
def make_counter():
    count = [0]
    def inc():
        count[0] += 1
        return count[0]
    return inc
counter = make_counter()
counter()
sq = lambda v: v * v
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm2(self):
        return self.x ** 2 + self.y ** 2
    def __eq__(self, o):
        return isinstance(o, Point) and (self.x, self.y) == (o.x, o.y)
pts = [Point(1, 2), Point(3, 4)]
class Color(enum.Enum):
    RED = 1
    GREEN = 2
    def shout(self):
        return self.name.upper() + "!"
fav = Color.GREEN
class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self): ...
class Sq(Shape):
    def __init__(self, s):
        self.s = s
    def area(self):
        return self.s * self.s
class Sq2(Sq):
    def area(self):
        return 2 * super().area()
shape = Sq2(3)
@dataclass
class Item:
    name: str
    tags: list = field(default_factory=list)
item = Item("a", ["x"])
arr = np.arange(300000, dtype=np.float64)
arr2 = arr
lst = [1, 2]
alias = lst
df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [4, 5, 6])
gen = (i for i in range(3))
with open("data.txt", "w") as f:
    f.write("line1\nline2\nline3\n")
fh = open("data.txt")
fh.readline()
blob = bytes(range(256)) * 8192
'''

CHECKS = [
    "n == 42 and s == 'héllo' and nested['a'][2]['b'] == (3, 4)",
    "_cache",
    "add(1)",
    "counter(), counter()",
    "sq(7)",
    "pts[1].norm2(), isinstance(pts[0], Point), pts[0] == Point(1, 2)",
    "fav is Color.GREEN, Color.RED.shout(), isinstance(fav, Color), Color(1) is Color.RED",
    "isinstance(shape, Shape), isinstance(shape, Sq), shape.area(), Shape.__abstractmethods__",
    "item.tags, isinstance(item, Item), Item('b').tags, __import__('dataclasses').asdict(item)",
    "arr2 is arr, float(arr.sum()), arr.flags.writeable",
    "alias is lst",
    "np.__name__, dumps([1])",
    "df.equals(pd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']}))",
    "type(fig).__name__, len(fig.axes), list(fig.axes[0].lines[0].get_ydata())",
    "fh.readline(), fh.mode",
    "len(blob), blob[:3], blob == bytes(range(256)) * 8192",
    "'gen' in dir()",
    "arr[0] = 7.0; alias.append(3); (arr2[0], lst)",
]


class Harness:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="agent-test-")
        self.spool = os.path.join(self.root, "spool")
        self.store = os.path.join(self.root, "store")
        self.work = os.path.join(self.root, "work")
        for d in (self.spool, self.store, self.work):
            os.makedirs(d)

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def kernel(self, steps, manifest=None, execution_count=None, **restore_args):
        """Runs steps in a new process (zygote.run), after restoring manifest (restore_args: more restore op
        arguments, e.g. replay=False), its first cell numbered execution_count when given."""
        plan = os.path.join(self.root, "plan.json")
        with open(plan, "w") as f:
            json.dump({"steps": steps, "manifest": manifest, "restore_args": restore_args,
                       "execution_count": execution_count}, f)
        env = dict(os.environ, MPLBACKEND="Agg")
        harness = os.path.join(HERE, "agent_harness.py")
        if zygote.FORK:  # a child of a zygote that has imported what the fresh process below would have
            p = zygote.run(PY, harness, [self.spool, self.store, plan], self.work, env, 300)
        else:
            p = subprocess.run([PY, harness, self.spool, self.store, plan],
                               cwd=self.work, capture_output=True, text=True, timeout=300, env=env)
        if p.returncode != 0 or "@@RESULT@@" not in p.stdout:
            raise AssertionError("harness failed (%d):\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
        return json.loads(p.stdout.split("@@RESULT@@", 1)[1])


class AgentTest(unittest.TestCase):
    def setUp(self):
        self.h = Harness()

    def tearDown(self):
        self.h.close()

    def test_index_chunks(self):
        """A buffer of more than 64 chunks is listed through index chunks: a changed element stores one
        data chunk, one index chunk and the descriptor, and a fresh kernel restores it whole."""
        steps = [{"run": "import numpy as np\na = np.arange(40_000, dtype=np.float64)"},  # 79 chunks
                 {"checkpoint": True, "chunk_size": 4096},
                 {"run": "a[30_000] = -1.0"}, {"checkpoint": True, "chunk_size": 4096}]
        out = self.h.kernel(steps)
        first, second = out["steps"][1], out["steps"][3]
        ref = next(g["r"] for g in second["manifest"]["groups"] if g["n"] == ["a"])
        with open(os.path.join(self.h.store, ref), "rb") as f:
            b = json.loads(f.read())["b"]
        self.assertEqual([len(b), len(b[0]), b[0][2], len(b[0][3])], [1, 4, [], 2], b)
        self.assertLess(second["written"], 4096 + 3000 + 1000, (first["written"], second["written"]))
        back = self.h.kernel([{"run": "float(a[30_000]), float(a.sum()), a.dtype.name"}], manifest=second["manifest"])
        self.assertEqual(back["restore"]["failed"], [])
        self.assertEqual(back["steps"], ["(-1.0, %r, 'float64')" % (sum(range(40_000)) - 30_000 - 1.0)])

    def test_roundtrip_everything(self):
        out = self.h.kernel([{"run": SETUP}, {"checkpoint": True}])
        self.assertNotIn("ERROR", json.dumps(out["steps"][0]))
        cp = out["steps"][1]
        skipped = {s["name"]: s for s in cp["result"]["skipped"]}
        self.assertEqual(set(skipped), {"gen"}, skipped)
        self.assertEqual(skipped["gen"]["type"], "generator")
        names = {n for g in cp["manifest"]["groups"] for n in g["n"]}
        for hidden in ("In", "Out", "_", "get_ipython", "exit", "__builtins__", "__carryover__", "_i1"):
            self.assertNotIn(hidden, names)
        self.assertIn("_cache", names)
        groups = {tuple(g["n"]): g for g in cp["manifest"]["groups"]}
        self.assertIn(("arr", "arr2"), groups)
        self.assertIn(("alias", "lst"), groups)
        self.assertEqual(groups[("np",)]["k"], "imp")
        self.assertEqual(groups[("dumps",)].get("a"), "dumps")

        out2 = self.h.kernel([{"run": c} for c in CHECKS], manifest=cp["manifest"])
        self.assertEqual(out2["restore"]["failed"], [])
        got = out2["steps"]
        want = [
            "True", "{'k': 1}", "44", "(2, 3)", "49", "(25, True, True)",
            "(True, 'RED!', True, True)", "(True, True, 18, frozenset({'area'}))",
            "(['x'], True, [], {'name': 'a', 'tags': ['x']})", "(True, 44999850000.0, True)", "True",
            "('numpy', '[1]')", "True", "('Figure', 1, [4, 5, 6])", "('line2\\n', 'r')",
            "(2097152, b'\\x00\\x01\\x02', True)", "False", "(7.0, [1, 2, 3])",
        ]
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertEqual(g, w, "check %d: %s" % (i, CHECKS[i]))

    def test_incremental(self):
        steps = [
            {"run": "import numpy as np\nbig = np.random.rand(600000)\nx = 1\nd = {'a': [1]}\nv = d['a']"},
            {"checkpoint": True},
            {"run": "x = 2"},  # S1: only x
            {"checkpoint": True},
            {"run": "t = float(big.sum())"},  # S2: big read, unchanged
            {"checkpoint": True},
            {"run": "big[0] = -1.0"},  # S3: one chunk
            {"checkpoint": True},
            {"run": "v.append(2)"},  # mutation through an alias: small-group recheck
            {"checkpoint": True},
            {"run": "del x"},
            {"checkpoint": True},
        ]
        out = self.h.kernel(steps)
        s1, s2, s3, s4, s5 = (out["steps"][i] for i in (3, 5, 7, 9, 11))
        self.assertEqual(s1["result"]["saved"], ["x"])
        self.assertLess(s1["written"], 1024)
        self.assertEqual(s2["result"]["saved"], ["t"])
        self.assertLess(s2["written"], 1024)
        self.assertEqual(s3["result"]["saved"], ["big"])
        big_chunks = [c for c in s3["result"]["chunks"] if c["n"] == 1 << 20]
        self.assertEqual(len(big_chunks), 1, s3["result"]["chunks"])
        self.assertEqual(sorted(s4["result"]["saved"]), ["d", "v"])
        self.assertNotIn("x", {n for g in s5["manifest"]["groups"] for n in g["n"]})
        out2 = self.h.kernel([{"run": "big[0], d, v is d['a'], t == float(big.sum()) + 1 + big[0] - big[0] - 1"}],
                             manifest=s5["manifest"])
        self.assertEqual(out2["restore"]["failed"], [])
        self.assertTrue(out2["steps"][0].startswith("(-1.0, {'a': [1, 2]}, True"), out2["steps"][0])

    def test_failed_commit_resends(self):
        # A snapshot Go did not commit must not make the agent think Go has its chunks.
        steps = [
            {"run": "a = list(range(10))"},
            {"checkpoint": True, "fail_commit": True},
            {"run": "b = 1"},
            {"checkpoint": True},
        ]
        out = self.h.kernel(steps)
        second = out["steps"][3]["result"]
        self.assertEqual(sorted(second["saved"]), ["a", "b"])

    def test_function_globals_and_methods(self):
        steps = [
            {"run": "cfg = {'k': 1}\ndef bump():\n    cfg['k'] += 1\nclass C:\n    def go(self):\n        bump()\nc = C()"},
            {"checkpoint": True},
            {"run": "c.go()"},  # cfg changes through a method calling a function
            {"checkpoint": True},
        ]
        out = self.h.kernel(steps)
        self.assertIn("cfg", out["steps"][3]["result"]["saved"])

    def test_unsaveable_reported_rest_saved(self):
        steps = [
            {"run": "import threading, socket\nlk = threading.Lock()\nsk = socket.socket()\nok = [1, 2]\n"
                    "import os\nwith open('kept.txt', 'w') as f0: pass\nwith open('gone.txt', 'w') as g0: pass\ngone = open('gone.txt')\nos.remove('gone.txt')"},
            {"checkpoint": True},
        ]
        out = self.h.kernel(steps)
        r = out["steps"][1]["result"]
        skipped = {s["name"]: s for s in r["skipped"]}
        self.assertEqual(set(skipped), {"sk", "gone"}, skipped)
        self.assertIn("g0", r["saved"])  # closed: only its name matters
        self.assertIn("lk", r["saved"])  # dill recreates a (released) lock
        self.assertIn("no longer exists", skipped["gone"]["reason"])
        self.assertIn("ok", r["saved"])
        self.assertIn("f0", r["saved"])  # a closed file: saved, reopened closed

    def test_files_held_by_skipped_values_are_flushed(self):
        # A generator (or any value that cannot be saved) may hold an open file with writes still in
        # its buffer: the checkpoint's workspace would keep the file without them and the restore
        # would have neither the generator nor the bytes. The checkpoint flushes such files first.
        steps = [
            {"run": "import os\ndef writer(path):\n    f = open(path, 'w')\n    while True:\n        f.write('x' * 100)\n        yield\n"
                    "g = writer('g.txt'); next(g)\n"
                    "import threading\nclass Holder:\n    def __init__(self):\n        self.lock = threading.Lock()\n"
                    "        self.sock = __import__('socket').socket()\n        self.parts = [open('h.txt', 'wb')]\n"
                    "h = Holder(); h.parts[0].write(b'y' * 50)\n"
                    # a regular file whose descriptor no longer writes (as a full disk would refuse)
                    "full = writer('ro.txt'); next(full)\n"
                    "fd = full.gi_frame.f_locals['f'].fileno(); os.dup2(os.open('ro.txt', os.O_RDONLY), fd)"},
            {"checkpoint": True},
            {"run": "(os.path.getsize('g.txt'), os.path.getsize('h.txt'))"},
            {"run": "next(g)"},
            {"checkpoint": True},
            {"run": "os.path.getsize('g.txt')"},
        ]
        out = self.h.kernel(steps)
        skipped = {s["name"]: s for s in out["steps"][1]["result"]["skipped"]}
        self.assertTrue({"g", "h", "full"} <= set(skipped), skipped)
        # a flush that fails (here: no space left) is told with the value, not dropped
        self.assertRegex(skipped["full"]["reason"], r"its open file ro.txt could not be written: .*Bad file descriptor", skipped)
        self.assertNotIn("could not be written", skipped["g"]["reason"])
        self.assertEqual(out["steps"][2], "(100, 50)")
        self.assertEqual(out["steps"][5], "200")  # a value skipped again (carried over) is flushed too
        again = {s["name"]: s for s in out["steps"][4]["result"]["skipped"]}
        self.assertEqual(again["full"]["reason"].count("could not be written"), 1, again["full"])

    def test_a_full_pipe_held_by_a_skipped_value_does_not_block_the_checkpoint(self):
        # Only regular files are flushed: a pipe whose reader never reads would block the flush.
        steps = [
            {"run": "import os, fcntl\nr, w = os.pipe()\nfcntl.fcntl(w, fcntl.F_SETFL, os.O_NONBLOCK)\n"
                    "while True:\n    try: os.write(w, b'z' * 4096)\n    except BlockingIOError: break\n"
                    "fcntl.fcntl(w, fcntl.F_SETFL, 0)\npipe = os.fdopen(w, 'wb')\npipe.write(b'y' * 100)\n"
                    "def hold(f):\n    yield f\ng = hold(pipe); next(g)"},
            {"checkpoint": True},
            {"run": "len(pipe.raw.name.__class__.__name__) > 0"},
        ]
        out = self.h.kernel(steps)  # the harness's 300 s timeout would fail a blocked flush
        self.assertIn("g", {s["name"] for s in out["steps"][1]["result"]["skipped"]})
        self.assertEqual(out["steps"][2], "True")


if __name__ == "__main__":
    unittest.main()
