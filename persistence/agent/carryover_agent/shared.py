"""Buffers mapped from the node's shared copies (Go's persistence/shared_bufs.go). The ``shared_map``
op receives one sealed memfd per large buffer over a unix socket and maps each copy-on-write
(MAP_PRIVATE): the kernels restoring the same checkpoint (a fork's children) read one copy of the
bytes, and a page one writes becomes its own, seen by no other kernel, the parent or the checkpoint.
The seals forbid every write to the copy itself, so no holder can change what the others read.

The socket stays open for the kernel's life: its closing tells the server that this kernel no
longer maps the copies (the memory itself is freed by Linux with the last mapping)."""

import mmap
import os
import socket

_maps = {}  # id -> mmap of the restore in progress, taken by its groups
_socks = []  # kept open until the kernel exits


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
            made.append((b["id"], mmap.mmap(fd, b["n"], access=mmap.ACCESS_COPY)))
    except BaseException:
        for _, m in made:
            m.close()
        sock.close()
        raise
    finally:
        for fd in fds:
            os.close(fd)
    sock.settimeout(None)
    _socks.append(sock)
    for i, m in made:
        _maps[i] = m
    return {"ok": True}


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
