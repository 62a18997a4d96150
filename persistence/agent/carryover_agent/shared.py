"""Buffers mapped from the node's shared copies (Go's persistence/shared_bufs.go). The ``shared_map``
op receives one sealed memfd per large buffer over a unix socket and maps each copy-on-write
(MAP_PRIVATE): the kernels restoring the same checkpoint (a fork's children) read one copy of the
bytes, and a page one writes becomes its own, seen by no other kernel, the parent or the checkpoint.
The seals forbid every write to the copy itself, so no holder can change what the others read.

The socket of a hand-off stays open while this kernel maps any of its copies (a weakref finalizer
on each mapping counts them down; a mapping goes when no array views it any more): its closing
tells the server that this kernel no longer maps them, as the kernel's exit does. The memory itself
is freed by Linux with the last mapping and the server's descriptor."""

import mmap
import os
import socket
import weakref

_maps = {}  # id -> mmap of the restore in progress, taken by its groups
_live = {}  # hand-off socket -> how many of its mappings are alive


def _unmapped(sock):
    """One mapping of the hand-off on sock is gone; the last one closes the socket."""
    _live[sock] -= 1
    if _live[sock] <= 0:
        del _live[sock]
        sock.close()


def op_shared_map(agent, a):
    """Maps a["bufs"] ([{id, n}]) from the memfds the server sends at a["sock"], in order."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(60)
    made, fds = [], []
    try:
        sock.connect(a["sock"])
        want = len(a["bufs"])
        while len(fds) < want:
            msg, got, _, _ = socket.recv_fds(sock, 1, want - len(fds))
            fds.extend(got)
            if not msg:
                raise OSError("the server closed the hand-off after %d of %d descriptors" % (len(fds), want))
        if len(fds) != want:
            raise OSError("the server sent %d descriptors, want %d" % (len(fds), want))
        for b, fd in zip(a["bufs"], fds):
            if os.fstat(fd).st_size != b["n"]:
                raise OSError("shared buffer %d holds %d bytes, want %d" % (b["id"], os.fstat(fd).st_size, b["n"]))
            m = mmap.mmap(fd, b["n"], access=mmap.ACCESS_COPY)
            made.append((b["id"], m))
            _populate(m)
    except BaseException:
        for _, m in made:
            m.close()
        sock.close()
        raise
    finally:
        for fd in fds:
            os.close(fd)
    sock.settimeout(None)
    _live[sock] = len(made)
    for i, m in made:
        weakref.finalize(m, _unmapped, sock)
        _maps[i] = m
    return {"ok": True}


# MADV_POPULATE_READ (Linux 5.14): map every page of a range for reading, in one call.
_MADV_POPULATE_READ = 22


def _populate(m):
    """Maps all of a shared copy's pages now, read-only (still copy-on-write). The dirty tracker
    registers restored buffers for userfaultfd write-protection, and Linux maps no neighbouring
    pages on a fault in such a range (fault-around is off under uffd-wp): reading a 1 GiB copy then
    took 262,144 faults, ~0.45 s in each fork child, against ~0.1 s for this call. A kernel that never
    reads the buffer pays that ~0.1 s per GiB, and its page tables (2 MiB per GiB). Best effort: an
    older kernel (EINVAL) faults the pages in as before."""
    try:
        m.madvise(_MADV_POPULATE_READ)
    except OSError:
        pass


def take(i):
    """The shared buffer i, for the restore's group that holds it."""
    return _maps.pop(i)


def release_untaken():
    """Unmaps what the restore did not take (a group that failed before its buffers)."""
    for m in _maps.values():
        try:
            m.close()
        except BufferError:
            pass
    _maps.clear()
