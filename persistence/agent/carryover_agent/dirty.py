"""Dirty-page tracking for large numpy buffers (see the comment below); the snapshot asks
``_Tracker.hashes`` for a buffer's chunk hashes and a restore seeds it with the hashes it mapped."""

import mmap
import os
import sys

from . import lazy
from .common import _hash, _reason

# Dirty-page tracking: which pages of a large buffer a turn wrote, in time proportional to the pages
# written. userfaultfd in asynchronous write-protect mode (UFFD_USER_MODE_ONLY: no privilege needed)
# marks every page written since it was last protected; the PAGEMAP_SCAN ioctl on /proc/self/pagemap
# returns the written ranges and protects them again in one call (Linux 6.7+; CRIU uses the same). Only
# chunks holding written pages are hashed again. A false "clean" would lose data, so a buffer is
# trusted only while (a) it is exported by an array with the same id, (b) at the same address and
# length, (c) in a private mapping (writes through a shared file mapping from elsewhere are
# invisible), (d) registered by no other entry (one scan would consume the other's marks), and (e)
# the scan succeeds with PM_SCAN_CHECK_WPASYNC: memory freed (unmapped) and mapped again at the same
# address is no longer registered, so the scan fails and the buffer is hashed whole. Memory a freed
# array leaves mapped (the heap) changes content only through writes, which are marked. No reference
# to the array is kept: a weak reference would make numpy refuse ndarray.resize.
# Anything else falls back to hashing every chunk (the mode is reported in the snapshot's timings).

TRACK_MIN = 8 << 20  # buffers at least this large are tracked; smaller ones hash faster than a scan
# Chunk size of tracked buffers (when the snapshot's is larger): a turn that writes one element then
# stores 1 MiB, not 4 (S3: the store's durable write of the chunk was most of the turn's checkpoint).
# Only tracked buffers use it: hashing unchanged chunks costs nothing there. A buffer restored or
# tracked with another chunk size keeps it, so an existing checkpoint is never rewritten for it.
TRACKED_CHUNK = 1 << 20
TRACK_ENTRIES = 4096  # more entries than this (most of freed arrays): all are dropped, then re-made
_PAGE = mmap.PAGESIZE
_NR_USERFAULTFD = {"x86_64": 323, "aarch64": 282}
_UFFD_API, _UFFDIO_API, _UFFDIO_REGISTER, _UFFDIO_UNREGISTER = 0xAA, 0xC018AA3F, 0xC020AA00, 0x8010AA01
_UFFD_USER_MODE_ONLY, _UFFDIO_REGISTER_MODE_WP = 1, 2
_UFFD_FEATURE_WP_UNPOPULATED, _UFFD_FEATURE_WP_ASYNC = 1 << 13, 1 << 15
_PAGEMAP_SCAN = 0xC0606610
_PM_SCAN_WP_MATCHING, _PM_SCAN_CHECK_WPASYNC = 1, 2
_PAGE_IS_WRITTEN = 2
_SCAN_VEC = 256


class _Tracked:
    __slots__ = ("oid", "addr", "n", "start", "end", "cs", "hashes", "foreign")


class _Uffd:
    """The kernel interface: one userfaultfd in async write-protect mode and /proc/self/pagemap,
    set up on first use (mode "uffd"), or the reason it cannot be (mode "hash", why)."""

    def __init__(self):
        self.mode = None  # "uffd" once set up; None before; "hash" when unavailable
        self.why = ""

    def setup(self):
        if self.mode is not None:
            return self.mode == "uffd"
        self.mode = "hash"
        try:
            import ctypes
            import platform

            nr = _NR_USERFAULTFD.get(platform.machine())
            if nr is None:
                raise OSError("no userfaultfd syscall number for %s" % platform.machine())
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
            fd = libc.syscall(nr, os.O_CLOEXEC | os.O_NONBLOCK | _UFFD_USER_MODE_ONLY)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "userfaultfd: " + os.strerror(ctypes.get_errno()))
            api = (ctypes.c_uint64 * 3)(_UFFD_API, _UFFD_FEATURE_WP_ASYNC | _UFFD_FEATURE_WP_UNPOPULATED, 0)
            if libc.ioctl(fd, _UFFDIO_API, api) < 0:
                os.close(fd)
                raise OSError(ctypes.get_errno(), "UFFDIO_API WP_ASYNC: " + os.strerror(ctypes.get_errno()))
            pm = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
            self.ct, self.libc, self.fd, self.pm = ctypes, libc, fd, pm
            self.vec = (ctypes.c_uint64 * (3 * _SCAN_VEC))()
            self.arg = (ctypes.c_uint64 * 12)()
            # Probe PAGEMAP_SCAN (Linux 6.7+) on a page of our own before trusting it.
            probe = mmap.mmap(-1, _PAGE)
            probe[0:1] = b"x"
            a = ctypes.addressof(ctypes.c_char.from_buffer(probe))
            if not self.register(a, a + _PAGE) or self.scan(a, a + _PAGE) is None:
                raise OSError("PAGEMAP_SCAN with a write-protected range failed")
            probe[0:1] = b"y"
            if self.scan(a, a + _PAGE) != [(a, a + _PAGE)]:
                raise OSError("PAGEMAP_SCAN did not report a written page")
            self.unregister(a, a + _PAGE)
            self._probe = probe  # kept mapped: an unmapped registered range could be reused unregistered
            self.mode = "uffd"
            return True
        except Exception as e:
            self.why = _reason(e)
            return False

    def register(self, start, end):
        reg = (self.ct.c_uint64 * 4)(start, end - start, _UFFDIO_REGISTER_MODE_WP, 0)
        return self.libc.ioctl(self.fd, _UFFDIO_REGISTER, reg) == 0

    def unregister(self, start, end):
        rng = (self.ct.c_uint64 * 2)(start, end - start)
        self.libc.ioctl(self.fd, _UFFDIO_UNREGISTER, rng)

    def scan(self, start, end):
        """Written ranges in [start, end), write-protected again; None when the scan fails (a page
        not registered for async write-protect: the memory is not what was registered)."""
        out = []
        arg, vec = self.arg, self.vec
        while start < end:
            arg[:] = [96, _PM_SCAN_WP_MATCHING | _PM_SCAN_CHECK_WPASYNC, start, end, 0,
                      self.ct.addressof(vec), _SCAN_VEC, 0, 0, _PAGE_IS_WRITTEN, 0, _PAGE_IS_WRITTEN]
            n = self.libc.ioctl(self.pm, _PAGEMAP_SCAN, arg)
            if n < 0:
                return None
            out.extend((vec[3 * i], vec[3 * i + 1]) for i in range(n))
            if n < _SCAN_VEC or arg[4] >= end:
                break
            start = arg[4]
        return out

    def private(self, start, end):
        """Whether [start, end) lies in private mappings (checked once, at registration)."""
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    rng, perms = line.split(None, 2)[:2]
                    lo, hi = (int(x, 16) for x in rng.split("-"))
                    if hi <= start or lo >= end:
                        continue
                    if perms[3] != "p":
                        return False
            return True
        except OSError:
            return False

    def close(self):
        if self.mode == "uffd":
            os.close(self.fd)
            os.close(self.pm)
        self.mode, self.why = "hash", "closed"


class _Tracker:
    """Per-buffer chunk hashes kept valid by dirty-page scans (see the section comment)."""

    def __init__(self):
        self.k = _Uffd()
        self.entries = {}  # (addr, n) -> _Tracked
        self.stats = {}

    @property
    def mode(self):
        return self.k.mode

    @property
    def why(self):
        return self.k.why

    def reset_stats(self):
        self.stats = {"tracked": 0, "rehashed": 0, "hashed": 0, "fallback": ""}

    def hashes(self, mv, cs):
        """[[hash, len], ...] of mv's chunks, hashing only chunks with pages written since last time.
        A tracked buffer's chunks are TRACKED_CHUNK long (or the size it was tracked with), not cs."""
        n = len(mv)
        st = self.stats
        exporter = mv.obj
        np = sys.modules.get("numpy")
        if n < TRACK_MIN or np is None or type(exporter) is not np.ndarray or not self.k.setup():
            if n >= TRACK_MIN:
                st["fallback"] = st["fallback"] or (self.why or "buffer of a %s" % type(exporter).__name__)
            st["hashed"] += n
            return _hash_all(mv, cs)
        addr = exporter.__array_interface__["data"][0]
        e = self.entries.get((addr, n))
        if e is not None and (e.oid != id(exporter) or e.cs > cs):
            self._drop(e)
            e = None
        dirty = None
        if e is not None:
            dirty = self.k.scan(e.start, e.end)
            if dirty is None:
                self._drop(e)
                e = None
        if e is None:
            e = self._track(exporter, addr, n, min(cs, TRACKED_CHUNK))
            if e is None:
                st["fallback"] = st["fallback"] or "buffer at %#x could not be registered" % addr
                st["hashed"] += n
                return _hash_all(mv, cs)
            e.hashes = _hash_all(mv, e.cs)
            st["tracked"] += n
            st["hashed"] += n
            return [list(h) for h in e.hashes]
        st["tracked"] += n
        cs = e.cs
        for lo, hi in dirty:
            first = max(0, (lo - addr) // cs)
            last = min((n - 1) // cs, (hi - 1 - addr) // cs)
            for i in range(first, last + 1):
                piece = mv[i * cs:(i + 1) * cs]
                e.hashes[i] = [_hash(piece), len(piece)]
                st["rehashed"] += len(piece)
        return [list(h) for h in e.hashes]

    def _track(self, exporter, addr, n, cs):
        start = addr - addr % _PAGE
        end = -(-(addr + n) // _PAGE) * _PAGE
        self.purge()
        for o in [o for o in self.entries.values() if o.start < end and start < o.end]:
            # Two entries over one page: one scan would hide the other's writes. The old one is dropped
            # (its array, if alive, is hashed whole next time: dropping is always safe).
            self._drop(o)
        # A lazily restored buffer is registered already, by the server's userfaultfd (lazy.py): its
        # pages are scanned the same way, and never unregistered from here.
        foreign = lazy.covers(start, end)
        if not self.k.private(start, end) or not (foreign or self.k.register(start, end)):
            return None
        if self.k.scan(start, end) is None:  # protects every page: from here on, writes are seen
            if not foreign:
                self.k.unregister(start, end)
            return None
        e = _Tracked()
        e.oid, e.addr, e.n, e.start, e.end, e.cs, e.hashes = id(exporter), addr, n, start, end, cs, []
        e.foreign = foreign
        self.entries[(addr, n)] = e
        return e

    def _drop(self, e):
        self.entries.pop((e.addr, e.n), None)
        if not e.foreign:
            self.k.unregister(e.start, e.end)

    def seed(self, exporter, addr, n, cs, chunks):
        """Trusts chunks ([[hash, len], ...], what a restore just mapped at addr) as the hashes of
        exporter's buffer from now on: a restored array is not hashed again at its first checkpoint."""
        if n < TRACK_MIN or not self.k.setup():
            return False
        old = self.entries.get((addr, n))
        if old is not None:
            self._drop(old)
        e = self._track(exporter, addr, n, cs)
        if e is None:
            return False
        e.hashes = [[h, ln] for h, ln in chunks]
        return True

    def close(self):
        """Unregisters everything and closes the descriptors (tests; a kernel keeps its tracker)."""
        for e in list(self.entries.values()):
            self._drop(e)
        self.k.close()

    def purge(self, keep=TRACK_ENTRIES):
        """Bounds the entries (those of freed arrays are only found stale when used or overlapped)."""
        if len(self.entries) > keep:
            for e in list(self.entries.values()):
                self._drop(e)


def _hash_all(mv, cs):
    return [[_hash(mv[off:off + cs]), len(mv[off:off + cs])] for off in range(0, len(mv), cs)]

