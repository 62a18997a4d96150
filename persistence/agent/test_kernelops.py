"""In-process tests of the session service's ops (kernelops.py: setup, env, output_guard, variables),
called as the server calls them: __carryover__.call(op, json) then take().

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py' (go test runs it too)."""

import importlib
import io
import os
import sys
import tempfile
import types
import unittest

import agent_harness as h


class KernelOpsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.cwd0 = os.getcwd()
        self.env0 = dict(os.environ)
        self.sh, self.agent = h.new_shell(os.path.join(self.tmp, "spool"))

    def tearDown(self):
        os.chdir(self.cwd0)
        os.environ.clear()
        os.environ.update(self.env0)

    def test_setup(self):
        wd = os.path.join(self.tmp, "ws", "sub")
        r = h.call(self.agent, "setup", {"cwd": wd, "env": {"CARRYOVER_T": "1"}, "execution_count": 7})
        self.assertEqual(r, {"ok": True})
        self.assertEqual(os.getcwd(), os.path.realpath(wd))
        self.assertEqual(os.environ["CARRYOVER_T"], "1")
        self.assertEqual(self.sh.execution_count, 7)
        h.call(self.agent, "setup", {"cwd": wd, "env": {}})  # no count: the counter is left alone
        self.assertEqual(self.sh.execution_count, 7)

    def test_setup_forgets_listings_of_a_folder_mounted_with_the_same_mtime(self):
        # A folder on sys.path listed while it was empty, then given a module with its mtime put back
        # (as a mount of another folder made within the same clock tick looks): without the set-up,
        # the import is not found; after it (op_setup, or the first cell's metadata), it is.
        d = os.path.join(self.tmp, "skills")
        os.makedirs(d)
        sys.path.insert(0, d)
        self.addCleanup(sys.path.remove, d)
        with self.assertRaises(ModuleNotFoundError):
            __import__("carryover_t_mounted")
        st = os.stat(d)
        with open(os.path.join(d, "carryover_t_mounted.py"), "w") as f:
            f.write("X = 1\n")
        os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
        with self.assertRaises(ModuleNotFoundError):
            __import__("carryover_t_mounted")  # the stale listing: what the fix is for
        h.call(self.agent, "setup", {"cwd": self.tmp, "env": {}})
        self.assertEqual(__import__("carryover_t_mounted").X, 1)
        sys.modules.pop("carryover_t_mounted", None)
        os.remove(os.path.join(d, "carryover_t_mounted.py"))
        os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
        importlib.invalidate_caches()
        with self.assertRaises(ModuleNotFoundError):
            __import__("carryover_t_mounted")
        with open(os.path.join(d, "carryover_t_mounted.py"), "w") as f:
            f.write("X = 2\n")
        os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
        from carryover_agent import agent as agent_mod

        agent_mod._apply_setup({"cwd": self.tmp, "env": {}})  # a first cell's set-up, from its metadata
        self.assertEqual(__import__("carryover_t_mounted").X, 2)
        sys.modules.pop("carryover_t_mounted", None)

    def test_setup_error_names_the_cause(self):
        blocker = os.path.join(self.tmp, "file")
        open(blocker, "w").close()
        with self.assertRaises(OSError):
            h.call(self.agent, "setup", {"cwd": os.path.join(blocker, "sub"), "env": {}})

    def test_env_sets_and_removes(self):
        os.environ["CARRYOVER_KEEP"] = "session"
        h.call(self.agent, "env", {"vars": {"CARRYOVER_KEEP": "run", "CARRYOVER_RUN": "x"}})
        self.assertEqual((os.environ["CARRYOVER_KEEP"], os.environ["CARRYOVER_RUN"]), ("run", "x"))
        h.call(self.agent, "env", {"vars": {"CARRYOVER_KEEP": "session", "CARRYOVER_RUN": None}})
        self.assertEqual(os.environ["CARRYOVER_KEEP"], "session")
        self.assertNotIn("CARRYOVER_RUN", os.environ)

    def test_variables(self):
        ns = self.sh.user_ns
        ns.update({"n": 3, "xs": [1, 2, 3], "_private": 1, "mod": types, "blob": b"abcd"})

        class Shaped:
            shape = (2, 3)

        ns["arr"] = Shaped()
        try:
            got = {d["name"]: d for d in h.call(self.agent, "variables", {})}
        finally:
            for k in ("n", "xs", "_private", "mod", "blob", "arr"):
                ns.pop(k, None)
        self.assertNotIn("_private", got)
        self.assertNotIn("mod", got)
        self.assertNotIn("__carryover__", got)
        self.assertEqual(got["n"]["type"], "int")
        self.assertEqual(got["xs"]["length"], 3)
        self.assertEqual(got["blob"]["bytes"], sys.getsizeof(b"abcd"))
        self.assertEqual(got["arr"]["shape"], [2, 3])
        self.assertTrue(got["arr"]["type"].endswith("Shaped"))

    def test_agent_answers_skip_the_display_formatters(self):
        """An agent answer (JSONText) comes back as a user expression whose text/plain is the JSON
        itself, without running IPython's display formatters; any other value is formatted by them as
        before. A kernel's 0.5 ms sleep before each reply is off; a value set since stands."""
        from carryover_agent.agent import install as agent_install
        from carryover_agent.common import JSONText
        calls = []
        real = self.sh.display_formatter.format

        def counting(obj, *a, **kw):
            calls.append(type(obj).__name__)
            return real(obj, *a, **kw)
        self.sh.display_formatter.format = counting
        self.sh.user_ns["JSONText"] = JSONText
        try:
            out = self.sh.user_expressions({"a": "JSONText('{\"k\": [1, 2]}')", "b": "[1, 2]", "c": "1/0"})
        finally:
            del self.sh.display_formatter.format
        self.assertEqual(out["a"], {"status": "ok", "data": {"text/plain": '{"k": [1, 2]}'}, "metadata": {}})
        self.assertEqual(out["b"]["data"]["text/plain"], "[1, 2]")
        self.assertEqual(out["c"]["status"], "error")
        self.assertEqual(calls, ["list"])

        class Kernel:
            _execute_sleep = 0.0005
        self.sh.kernel = Kernel()
        try:
            agent_install(os.path.join(self.tmp, "spool2"), shell=self.sh)
            self.assertEqual(self.sh.kernel._execute_sleep, 0)
            self.sh.kernel._execute_sleep = 2  # a test holding the reply back
            agent_install(os.path.join(self.tmp, "spool3"), shell=self.sh)
            self.assertEqual(self.sh.kernel._execute_sleep, 2)
        finally:
            del self.sh.kernel

    def test_output_guard(self):
        out = io.StringIO()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, io.StringIO()
        try:
            h.call(self.agent, "output_guard", {"cap": 10, "chunk": 4})
            self.sh.events.trigger("pre_run_cell", None)
            self.assertEqual(sys.stdout.write("0123456789abc"), 13)  # all claimed written
            sys.stdout.write("more")
            first = out.getvalue()
            self.sh.events.trigger("pre_run_cell", None)  # a new cell: a new allowance
            sys.stdout.write("xyz")
        finally:
            sys.stdout, sys.stderr = saved
        self.assertTrue(first.startswith("0123456789\n[carryover: output past run.max_output_bytes=10"))
        self.assertEqual(first.count("[carryover:"), 1)
        self.assertNotIn("more", first)
        self.assertTrue(out.getvalue().endswith("xyz"))


if __name__ == "__main__":
    unittest.main()


class SnapshotBookkeepingTest(unittest.TestCase):
    """What a snapshot reads cheaply from caches (the names judged IPython's, the environment's last
    diff) follows the kernel as a fresh reading would."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.env0 = dict(os.environ)
        self.sh, self.agent = h.new_shell(os.path.join(self.tmp, "spool"))
        self.n = 0

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.env0)

    def snap(self):
        self.n += 1
        return h.call(self.agent, "snapshot", {"token": "t%d" % self.n, "committed": "t%d" % (self.n - 1)})

    def test_environment_changes_after_a_cached_diff(self):
        os.environ.pop("CARRYOVER_SNAP", None)
        self.snap()
        self.assertNotIn("CARRYOVER_SNAP", self.snap()["env"]["set"])  # the cached diff
        os.environ["CARRYOVER_SNAP"] = "1"
        self.assertEqual(self.snap()["env"]["set"].get("CARRYOVER_SNAP"), "1")
        os.environ["CARRYOVER_SNAP"] = "2"
        self.assertEqual(self.snap()["env"]["set"].get("CARRYOVER_SNAP"), "2")
        del os.environ["CARRYOVER_SNAP"]
        self.assertNotIn("CARRYOVER_SNAP", self.snap()["env"]["set"])
        home = os.environ.pop("HOME", None)
        if home is not None:
            self.assertIn("HOME", self.snap()["env"]["unset"])

    def test_a_list_holding_a_named_value_is_pickled_once(self):
        """``path.append(theta)`` in a loop: path and theta are pickled together at once, not path
        alone first and then again with theta (twice the work for the same group); a list holding a
        string of another name (a shared type) still saves apart."""
        from carryover_agent import pickling
        calls = []
        real = pickling.pickle_one

        def counting(agent, names, values):
            calls.append(tuple(names))
            return real(agent, names, values)
        self.sh.run_cell("import numpy as np\nhold_theta = np.zeros((2, 1))\nhold_path = []\n"
                         "for _ in range(50):\n    hold_theta = hold_theta - 1\n    hold_path.append(hold_theta)\n"
                         "hold_s = 'x' * 3\nhold_l = [hold_s, 1]")
        pickling.pickle_one = counting
        try:
            r = self.snap()
        finally:
            pickling.pickle_one = real
        mine = [c for c in calls if any(n.startswith("hold_") for n in c)]
        self.assertEqual(sorted(mine), [("hold_l",), ("hold_path", "hold_theta"), ("hold_s",)])
        groups = sorted(tuple(g["n"]) for g in r["groups"] if any(n.startswith("hold_") for n in g["n"]))
        self.assertEqual(groups, [("hold_l",), ("hold_path", "hold_theta"), ("hold_s",)])

    def test_a_small_array_only_read_is_not_pickled_again(self):
        """A cell that reads ``theta`` (held by ``path`` too) does not pickle their group again; one
        that changes it does, and so does a read after a change no snapshot saw (made here from
        outside any cell; the group, over SMALL_GROUP, is not re-checked): the print compared is the
        one of the bytes saved, not of the value at the last snapshot."""
        from carryover_agent import pickling
        calls = []
        real = pickling.pickle_one

        def counting(agent, names, values):
            calls.append(tuple(names))
            return real(agent, names, values)

        def snap(code):
            if code:
                self.sh.run_cell(code)
            del calls[:]
            pickling.pickle_one = counting
            try:
                r = self.snap()
            finally:
                pickling.pickle_one = real
            return [c for c in calls if "sm_path" in c], [n for n in r["saved"] if n.startswith("sm_")]
        snap("import numpy as np\nsm_theta = np.zeros((2, 1))\nsm_path = []\n"
             "for _ in range(2000):\n    sm_theta = sm_theta - 1\n    sm_path.append(sm_theta)")
        self.assertEqual(snap("sm_theta"), ([], []))
        self.assertEqual(snap("sm_theta.sum()"), ([], []))
        self.assertEqual(snap("sm_theta += 1"), ([("sm_path", "sm_theta")], ["sm_path", "sm_theta"]))
        self.agent.ns["sm_theta"][0, 0] = 42.0  # no cell names it, and the group is too large to re-check
        self.assertEqual(snap(None), ([], []))
        self.assertEqual(snap("sm_theta"), ([("sm_path", "sm_theta")], ["sm_path", "sm_theta"]))
        self.assertEqual(snap("sm_theta"), ([], []))

    def test_small_arrays_are_remembered_by_digest_not_copied(self):
        """The snapshot remembers each small named array as saved (small_print) by its digest: 1,000
        arrays of 4 KiB add a few dozen bytes each to the agent's memory, not 4 MB of copies, and a
        read of one is still no candidate while a changed one is."""
        self.sh.run_cell("import numpy as np\nfor _i in range(1000):\n    globals()['dg_%d' % _i] = np.full(512, float(_i))")
        self.snap()
        self.snap()  # the first snapshot's state is the agent's once the next one says it committed
        small = {n: fp for n, fp in self.agent.state.small.items() if n.startswith("dg_")}
        self.assertEqual(len(small), 1000)
        held = sum(len(x) for fp in small.values() for x in fp if isinstance(x, (bytes, str)))
        self.assertLess(held, 1000 * 64, "small prints hold %d bytes" % held)
        self.sh.run_cell("dg_7.sum()")
        self.assertNotIn("dg_7", self.snap()["saved"])
        self.sh.run_cell("dg_7[3] = -1.0")
        self.assertIn("dg_7", self.snap()["saved"])

    def test_unchanged_interpreter_state_is_not_pickled_again(self):
        """A turn that changes no interpreter state (``1+1``) pickles only its history entry: the
        random generators, the libraries' settings and the loaded extensions' names reuse their last
        pickles. Loading an extension pickles @extensions once more, with the new name in it."""
        from carryover_agent import pickling, snapshot
        calls = []
        real, real_plain = pickling.pickle_one, pickling.pickle_plain

        def counting(agent, names, values):
            calls.append(names[0])
            return real(agent, names, values)

        def counting_plain(names, value):
            calls.append(names[0])
            return real_plain(names, value)

        def state_pickled(code):
            self.sh.run_cell(code)
            del calls[:]
            pickling.pickle_one = snapshot.pickle_one = counting
            snapshot.pickle_plain = counting_plain
            try:
                self.snap()
            finally:
                pickling.pickle_one = snapshot.pickle_one = real
                snapshot.pickle_plain = real_plain
            return sorted({n for n in calls if n.startswith("@") and not n.startswith("@carryover.history.")})
        # An IPython kernel loads storemagic at its start (this in-process shell does not).
        self.sh.run_cell("import random, numpy as np\nget_ipython().run_line_magic('load_ext', 'storemagic')")
        self.snap()
        self.assertEqual(state_pickled("1+1"), [])
        self.assertEqual(state_pickled("1+1"), [])
        self.assertEqual(state_pickled("get_ipython().run_line_magic('load_ext', 'autoreload')"), ["@extensions"])
        self.assertEqual(state_pickled("1+1"), [])
        saved = dict(snapshot._capture_state(self.sh, {}))["@extensions"]
        self.assertEqual(saved, ("IPython.extensions.autoreload", "IPython.extensions.storemagic"))

    def test_the_analysis_reads_the_cells_transform_from_the_history(self):
        """The snapshot's analysis of a turn's cells uses IPython's transform of each as the shell ran
        it (stored in its history), not a second transform; a cell run outside the history is
        transformed again. Either way a magic's names are found."""
        from carryover_agent import snapshot
        calls = []
        real = self.sh.transform_cell

        def counting(raw):
            calls.append(raw)
            return real(raw)

        self.sh.run_cell("import numpy as np\ntr_arr = np.zeros(3)")
        self.snap()
        self.sh.run_cell("%time tr_arr[0] = 7", store_history=True)
        self.sh.transform_cell = counting
        try:
            cand = snapshot._candidates(self.agent, list(self.agent.cells), self.agent._user_names(), self.agent.state)
            self.assertIn("tr_arr", cand)
            self.assertEqual(calls, [])
            self.snap()
            del self.sh.transform_cell  # %time transforms its own argument as it runs
            self.sh.run_cell("%time tr_arr[1] = 8", store_history=False)
            self.sh.transform_cell = counting
            cand = snapshot._candidates(self.agent, list(self.agent.cells), self.agent._user_names(), self.agent.state)
            self.assertIn("tr_arr", cand)
            self.assertEqual(calls, ["%time tr_arr[1] = 8"])
        finally:
            del self.sh.transform_cell

    def test_a_recheck_finds_a_change_and_pickles_only_it(self):
        """The re-check of small groups (mutations through aliases no cell names) compares a plain
        dump with the bytes saved: the changed group is found and pickled whole, the unchanged ones
        are not (pickle_one is their cost, a sixth of it the dump); session functions likewise, by
        their code and the rest dill would save (dill is their cost)."""
        from carryover_agent import pickling, snapshot
        calls = []
        real, real_def = pickling.pickle_one, snapshot.pickle_def

        def counting(agent, names, values):
            calls.append(tuple(names))
            return real(agent, names, values)

        def counting_def(agent, names, obj, skipped):
            calls.append(tuple(names))
            return real_def(agent, names, obj, skipped)

        def quiet():
            self.agent._settle("t%d" % self.n)  # the last snapshot's state is the one re-checked:
            self.agent.state.recheck_all = True  # every small group of it, whatever the budget
            del calls[:]
            pickling.pickle_one = snapshot.pickle_one = counting
            snapshot.pickle_def = counting_def
            try:
                r = self.snap()
            finally:
                pickling.pickle_one = snapshot.pickle_one = real
                snapshot.pickle_def = real_def
            return sorted(c for c in calls if c[0].startswith("rc_")), [n for n in r["saved"] if n.startswith("rc_")]
        self.sh.run_cell("import numpy as np\nrc_a = {'k': [1]}\nrc_b = [1, 2]\nrc_c = {'x': np.arange(3)}\n"
                         "rc_v = np.zeros(1000)\ndef rc_f(x, acc=[]):\n    return x\ndef rc_g(y):\n    return y")
        self.snap()
        self.assertEqual(quiet(), ([], []))
        ns = self.agent.ns  # no cell names what changes below
        ns["rc_a"]["k"].append(2)
        ns["rc_v"][5] = 1.0  # out of band (8,000 bytes): its buffer is in the digest
        ns["rc_f"].__defaults__[0].append(1)  # a session function's mutable default
        self.assertEqual(quiet(), ([("rc_a",), ("rc_f",), ("rc_v",)], ["rc_a", "rc_f", "rc_v"]))
        self.assertEqual(quiet(), ([], []))
        ns["rc_g"].__code__ = ns["rc_f"].__code__  # its code replaced
        self.assertEqual(quiet(), ([("rc_g",)], ["rc_g"]))

    def test_names_over_many_turns(self):
        base = set(self.agent._user_names())  # the shell is the process's one: other tests' names
        for i in range(300):
            self.sh.run_cell("%d" % i, store_history=True)
        self.sh.run_cell("snap_x = 1\n_snap_y = 2", store_history=True)
        self.snap()
        ns = self.agent.ns
        self.assertEqual(set(self.agent._user_names()), base | {"snap_x", "_snap_y"})
        self.sh.run_cell("del snap_x\n_7 = 'mine'\nsnap_z = 3", store_history=True)  # _7: an IPython name, as ever
        self.assertEqual(set(self.agent._user_names()), base | {"_snap_y", "snap_z"})
        for k in [k for k in ns if k[:1] == "_" and k[1:].isdigit()]:
            del ns[k]  # IPython's output cache flushed (%reset out)
        ns["_ipy_like_but_mine"] = 4
        self.assertEqual(set(self.agent._user_names()), base | {"_snap_y", "snap_z", "_ipy_like_but_mine"})
        self.assertLess(len(self.agent._ipy_seen), 2 * len(ns) + 1025)
        self.assertEqual(list(self.agent._user_names()), [k for k in ns if k in self.agent._user_names()])


class RendererHooksTest(unittest.TestCase):
    """install_renderer_hooks (kernelops.py) picks Plotly's and Altair's mimetype renderers when the
    user's code imports them, and imports neither itself. Run in a fresh interpreter: this process may
    have imported them already."""

    def run_py(self, code):
        import subprocess

        here = os.path.dirname(os.path.abspath(__file__))
        pre = "import sys; sys.path.insert(0, %r)\nfrom carryover_agent import kernelops\n" % here
        p = subprocess.run([sys.executable, "-c", pre + code], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.split()

    def test_plotly_and_altair_get_their_mimetype_renderers_on_import(self):
        try:
            import importlib.util as u

            if u.find_spec("plotly") is None or u.find_spec("altair") is None:
                self.skipTest("python3-plotly / python3-altair not installed (make deps installs them)")
        except ImportError:
            self.skipTest("no importlib.util")
        out = self.run_py(
            "kernelops.install_renderer_hooks()\n"
            "print('plotly' in sys.modules, 'altair' in sys.modules)\n"
            "import plotly.express as px, plotly.io as pio\nprint(pio.renderers.default)\n"
            "import altair as alt\nprint(alt.renderers.active)\n"
            "import ipywidgets\nprint(getattr(ipywidgets.Widget, '_version_validated', True))\n"
            "from tqdm.notebook import tqdm\nt = tqdm(range(3))\nprint(len(list(t)))\n"
        )
        # (outside a kernel the bar also prints its text form: only the count at the end is checked)
        self.assertEqual(out[:5] + out[-1:], ["False", "False", "plotly_mimetype", "mimetype", "True", "3"])

    def test_already_imported_library_is_set_at_once_and_a_choice_after_stays(self):
        try:
            import importlib.util as u

            if u.find_spec("plotly") is None:
                self.skipTest("python3-plotly not installed")
        except ImportError:
            self.skipTest("no importlib.util")
        out = self.run_py(
            "import plotly.io as pio\npio.renderers.default\n"
            "kernelops.install_renderer_hooks(); kernelops.install_renderer_hooks()\n"
            "print(pio.renderers.default)\npio.renderers.default = 'json'\nprint(pio.renderers.default)\n"
            "print(sum(isinstance(f, kernelops._AfterImport) for f in sys.meta_path))\n"
        )
        self.assertEqual(out, ["plotly_mimetype", "json", "1"])


class RowsTest(unittest.TestCase):
    """op_rows: the data viewer's pages of a DataFrame or array, sorted and searched in the kernel."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.sh, self.agent = h.new_shell(os.path.join(self.tmp, "spool"))

    def test_pages_sort_and_search(self):
        import numpy as np
        import pandas as pd

        n = 100_000
        self.sh.user_ns["df"] = pd.DataFrame({"i": np.arange(n), "v": (np.arange(n) * 7919) % n, "s": ["r%d" % i for i in range(n)]})
        r = h.call(self.agent, "rows", {"name": "df", "offset": 10, "limit": 3})
        self.assertEqual((r["total_rows"], r["matched_rows"], r["index"]), (n, n, [10, 11, 12]))
        self.assertEqual([c["name"] for c in r["columns"]], ["i", "v", "s"])
        self.assertEqual(r["rows"][0], [10, (10 * 7919) % n, "r10"])
        r = h.call(self.agent, "rows", {"name": "df", "sort": "v", "desc": True, "limit": 2})
        self.assertEqual([row[1] for row in r["rows"]], [n - 1, n - 2])
        r = h.call(self.agent, "rows", {"name": "df", "sort": "s", "limit": 3, "offset": 1})
        self.assertEqual([row[2] for row in r["rows"]], ["r1", "r10", "r100"])
        r = h.call(self.agent, "rows", {"name": "df", "q": "R9999", "sort": "i", "desc": True})
        self.assertEqual(r["matched_rows"], 11)  # r9999, r99990..r99999
        self.assertEqual(r["rows"][0][0], 99999)
        r = h.call(self.agent, "rows", {"name": "df", "limit": 5000})
        self.assertEqual(len(r["rows"]), 1000)

    def test_arrays_values_and_errors(self):
        import numpy as np

        self.sh.user_ns["a"] = np.array([[1.5, np.nan], [np.inf, 2.0]])
        self.sh.user_ns["v"] = np.arange(5)
        self.sh.user_ns["cube"] = np.zeros((2, 2, 2))
        self.sh.user_ns["x"] = 3
        r = h.call(self.agent, "rows", {"name": "a"})
        self.assertEqual(r["rows"], [[1.5, None], [None, 2.0]])
        r = h.call(self.agent, "rows", {"name": "v", "sort": "v", "desc": True, "limit": 2})
        self.assertEqual(r["rows"], [[4], [3]])
        self.assertEqual(h.call(self.agent, "rows", {"name": "nope"})["error"]["code"], "not_found")
        for args in ({"name": "cube"}, {"name": "x"}, {"name": "v", "sort": "zz"}):
            self.assertEqual(h.call(self.agent, "rows", args)["error"]["code"], "invalid_request", args)
