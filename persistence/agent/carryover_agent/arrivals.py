"""The files of a restore into a new kernel, loaded as they arrive: Go assembles them while the agent
loads (assembleWhileLoading), each under a temporary name renamed into place once whole, so a path
that exists is a whole file. A failed assembly leaves ABORT in the spool dir; a restore Go gave up
on loses the dir. Either way the wait ends in AssemblyFailed, which fails the restore (the kernel,
new, is stopped; nothing saved is touched)."""

import os
import time

ABORT = "assembly-failed"  # Go's abortMark
_PAUSE_MIN, _PAUSE_MAX = 0.0002, 0.002  # seconds between looks: a file waited for is found within 2 ms


class AssemblyFailed(Exception):
    pass


def paths(g):
    """The spool files group g loads from (restore.py's "pf", "bf" and "bp")."""
    return ([g["pf"]] if g.get("pf") else []) + [p for p in g.get("bf") or () if p] + [p["f"] for p in g.get("bp") or ()]


class Arrivals:
    """Which of a restore's files are there. With no spool dir (Go assembled every file before the
    call) all are."""

    def __init__(self, spool_dir):
        self.dir = spool_dir
        self.have = set()
        self.waited = 0.0  # seconds the load spent waiting for files

    def ready(self, g):
        if not self.dir:
            return True
        for p in paths(g):
            if p not in self.have:
                if not os.path.exists(p):
                    return False
                self.have.add(p)
        return True

    def wait(self, g):
        """Returns once g's files are all there."""
        if not self.ready(g):
            self.first_ready([g])

    def first_ready(self, groups):
        """The index of the first of groups whose files are all there, waiting for one. Between
        looks it sleeps at least 4 times what a look took (a look stats a file of every group not
        ready: thousands of groups would otherwise keep a core busy while Go needs it)."""
        t0, pause = None, _PAUSE_MIN
        while True:
            look = time.perf_counter()
            for i, g in enumerate(groups):
                if self.ready(g):
                    if t0 is not None:
                        self.waited += time.perf_counter() - t0
                    return i
            t0 = t0 or look
            self._check()
            time.sleep(max(pause, 4 * (time.perf_counter() - look)))
            pause = min(pause * 2, _PAUSE_MAX)

    def _check(self):
        try:
            with open(os.path.join(self.dir, ABORT)) as f:
                reason = f.read()
        except FileNotFoundError:
            if os.path.isdir(self.dir):
                return
            raise AssemblyFailed("the restore was given up (its spool dir is gone)") from None
        raise AssemblyFailed("the restore's files could not be read from the store: %s" % reason)
