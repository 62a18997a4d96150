"""Unit tests of arrivals.py: a restore's files loaded in the order they arrive, and the two ways a
failed assembly reaches the wait (no kernel; Go's side is checkpoint_overlap_test.go).

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py' (go test runs it too)."""

import os
import shutil
import tempfile
import threading
import time
import unittest

from carryover_agent.arrivals import ABORT, Arrivals, AssemblyFailed


class ArrivalsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def put_later(self, name, after=0.05):
        t = threading.Timer(after, lambda: open(self.path(name), "w").close())
        t.start()
        self.addCleanup(t.cancel)

    def test_no_dir_means_all_there(self):
        a = Arrivals(None)
        self.assertEqual(a.first_ready([{"pf": "/nonexistent/g0.p"}]), 0)
        self.assertEqual(a.waited, 0)

    def test_first_ready_takes_the_group_whose_files_came(self):
        a = Arrivals(self.dir)
        slow = {"pf": self.path("g0.p"), "bf": [self.path("g0.b0")]}
        fast = {"pd": "", "bf": ["", self.path("g1.b1")], "bp": [{"j": 1, "f": self.path("g1.b1.p1"), "o": 4096}]}
        open(self.path("g0.p"), "w").close()  # g0 lacks its buffer
        self.put_later("g1.b1", 0.01)
        self.put_later("g1.b1.p1", 0.03)
        self.assertEqual(a.first_ready([slow, fast]), 1)
        self.assertGreater(a.waited, 0.02)
        self.assertFalse(a.ready(slow))
        self.put_later("g0.b0")
        a.wait(slow)
        self.assertTrue(a.ready(slow))

    def test_waiting_for_many_groups_leaves_the_cpu_to_go(self):
        # Sleeping 4x a look bounds the wait at ~20% of a core (and the last look); looking every
        # 2 ms whatever a look costs took ~70% on an idle machine.
        a = Arrivals(self.dir)
        groups = [{"pf": self.path("g%d.p" % i)} for i in range(5000)]
        self.put_later("g4999.p", 0.5)
        wall, cpu = time.perf_counter(), time.process_time()
        self.assertEqual(a.first_ready(groups), 4999)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        self.assertLess(cpu, 0.35 * wall, "%.3f s of CPU in %.3f s waiting for 5,000 groups" % (cpu, wall))

    def test_abort_mark_ends_the_wait_with_its_reason(self):
        a = Arrivals(self.dir)
        with open(self.path(ABORT), "w") as f:
            f.write("assemble: chunk damaged")
        with self.assertRaisesRegex(AssemblyFailed, "chunk damaged"):
            a.wait({"pf": self.path("g0.p")})

    def test_removed_dir_ends_the_wait(self):
        a = Arrivals(self.dir)
        threading.Timer(0.02, shutil.rmtree, (self.dir,)).start()
        with self.assertRaisesRegex(AssemblyFailed, "given up"):
            a.wait({"pf": self.path("g0.p")})


if __name__ == "__main__":
    unittest.main()
