"""Lazily restored buffers (Go's persistence/lazy_restore.go). The ``lazy_map`` op maps each large
buffer of a restore as anonymous memory, registers it with a userfaultfd made from the device the
server lends over a unix socket (missing pages, and asynchronous write-protect for the dirty
tracker), hands that userfaultfd back and closes both descriptors: the server then copies the
chunks in, the one a thread touches first. A thread touching a page not filled yet waits, in user
code or in a system call, so a value is never seen half-restored.

What Linux does not carry over is handled here: a fork (no UFFD_FEATURE_EVENT_FORK) would give the
child zeros where pages were not filled yet, so the ranges are MADV_DONTFORK until the fill is done
(a child touching them faults instead of reading zeros), and ``os.fork`` waits for the fill first."""

import ctypes
import json
import mmap
import os
import socket
import time

_IOC_NEW = 0xAA00  # USERFAULTFD_IOC_NEW on /dev/userfaultfd
_UFFDIO_API, _UFFDIO_REGISTER = 0xC018AA3F, 0xC020AA00
_UFFD_API = 0xAA
_MODE_MISSING, _MODE_WP = 1, 2
_FEATURES = (1 << 15) | (1 << 13)  # WP_ASYNC, WP_UNPOPULATED
_MADV_DONTFORK, _MADV_DOFORK = 10, 11

_maps = {}  # id -> mmap of the restore in progress, taken by its groups
_ranges = []  # [start, end) registered by a server's userfaultfd (the dirty tracker scans them)
_fills = []  # one per lazy restore: its socket and ranges, until the server says the fill is done
_hooked = False


class _Fill:
    __slots__ = ("sock", "ranges", "maps", "state")


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ioctl.restype = ctypes.c_int
    libc.madvise.restype = ctypes.c_int
    return libc


def _check(r, what):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))
    return r


def op_lazy_map(agent, a):
    """Maps a["bufs"] ([{id, n}]) and hands their userfaultfd to the server at a["sock"]."""
    global _hooked
    libc = _libc()
    # Everything that may import runs before the device arrives: the kernel's cwd is the session's
    # workspace, on sys.path, and a module imported from there is user code, which must never run
    # while the device or the userfaultfd is open here.
    scan = agent._tracker.k.scan if agent._tracker.k.setup() else None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(60)
    made, dev, uffd = [], -1, -1
    try:
        sock.connect(a["sock"])
        _, fds, _, _ = socket.recv_fds(sock, 1, 4)
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise OSError("the server lent %d descriptors, want 1" % len(fds))
        dev = fds[0]
        uffd = _check(libc.ioctl(dev, ctypes.c_ulong(_IOC_NEW), ctypes.c_ulong(os.O_CLOEXEC | os.O_NONBLOCK)),
                      "USERFAULTFD_IOC_NEW")
        api = (ctypes.c_uint64 * 3)(_UFFD_API, _FEATURES, 0)
        _check(libc.ioctl(uffd, ctypes.c_ulong(_UFFDIO_API), api), "UFFDIO_API")
        for b in a["bufs"]:
            m = mmap.mmap(-1, b["n"], flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            made.append((b["id"], m))
            view = ctypes.c_char.from_buffer(m)
            addr = ctypes.addressof(view)
            del view
            ln = -(-b["n"] // mmap.PAGESIZE) * mmap.PAGESIZE
            reg = (ctypes.c_uint64 * 4)(addr, ln, _MODE_MISSING | _MODE_WP, 0)
            _check(libc.ioctl(uffd, ctypes.c_ulong(_UFFDIO_REGISTER), reg), "UFFDIO_REGISTER")
            if scan is not None:
                scan(addr, addr + ln)  # marks the unfilled pages write-protected: a first write is seen
            _check(libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(ln), _MADV_DONTFORK), "MADV_DONTFORK")
            made[-1] = (b["id"], m, addr, ln)
        out = json.dumps([{"id": i, "addr": ad, "len": ln} for i, _, ad, ln in made]) + "\n"
        socket.send_fds(sock, [out.encode()], [uffd])
    except BaseException:
        for x in made:
            x[1].close()
        sock.close()
        raise
    finally:
        for fd in (dev, uffd):
            if fd >= 0:
                os.close(fd)
    sock.settimeout(None)
    f = _Fill()
    f.sock, f.ranges, f.state = sock, [(ad, ln) for _, _, ad, ln in made], ""
    f.maps = [m for _, m, _, _ in made]
    _fills.append(f)
    for i, m, ad, ln in made:
        _maps[i] = m
        _ranges.append((ad, ad + ln))
    if not _hooked:
        os.register_at_fork(before=wait_all)
        _hooked = True
    return {"ok": True}


def take(i):
    """The lazily mapped buffer i, for the restore's group that holds it."""
    return _maps.pop(i)


def release_untaken():
    """Lets go of what the restore did not take (a group that failed before its buffers). Not
    unmapped here: the fill holds them until it is done (reap), as it does a buffer freed mid-fill."""
    _maps.clear()


def covers(start, end):
    """Whether [start, end) lies in a range a server's userfaultfd registered."""
    return any(s <= start and end <= e for s, e in _ranges)


def _poll(f, block):
    """Reads the server's word on fill f ("done" or "fail: ...") into f.state, waiting when block."""
    if f.state:
        return
    try:
        got = f.sock.recv(4096, socket.MSG_PEEK | (0 if block else socket.MSG_DONTWAIT))
    except BlockingIOError:
        return
    while block and got and not got.endswith(b"\n"):  # the rest of the line is on its way
        time.sleep(0.001)
        got = f.sock.recv(4096, socket.MSG_PEEK)
    if not got:
        f.state = "fail: the server closed the fill"
    elif got.endswith(b"\n"):
        f.state = got.decode(errors="replace").strip() or "fail"


def reap():
    """Lets go of the mappings of fills the server says are done. Until then the fill holds them:
    a buffer freed mid-fill stays mapped, so its address is not reused by memory the server would
    still copy into."""
    for f in _fills:
        _poll(f, False)
        if f.state:
            f.maps = []


def pending():
    """How many lazy fills the server has not said are done (without waiting)."""
    reap()
    return sum(1 for f in _fills if not f.state)


def wait_all():
    """Waits until every lazy fill is done (before a fork), then lets children inherit the ranges."""
    libc = None
    for f in _fills:
        while not f.state:
            _poll(f, True)
        f.maps = []
        if f.state == "done" and f.ranges:
            libc = libc or _libc()
            for ad, ln in f.ranges:
                libc.madvise(ctypes.c_void_p(ad), ctypes.c_size_t(ln), _MADV_DOFORK)  # ENOMEM when freed
            f.ranges = []
