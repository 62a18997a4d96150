"""The spool side of a snapshot: a pickled group cut into hashed chunks plus its descriptor (the one
chunk the manifest names), and each new chunk handed to Go, zstd-compressed when that pays, inline
(base64) when small or as a file <spool>/<token>/<hash>."""

import base64
import json
import os
import threading

from .common import INLINE_MAX, SAMPLE, _hash, _typename, zstandard
from .groups import _Group


# A buffer of more chunks than this lists them in index chunks of this many each, and the descriptor
# lists the index chunks: a turn that writes one chunk of a 1 GiB array then writes a new index chunk
# of 64 entries and a descriptor of 16, not a descriptor of 1,024 (whose edges the store records
# again each time). A group of more buffers than this (a container in slices: one buffer per slice)
# lists its buffers the same way, under "bx". Go expands both when it reads a descriptor
# (expandDescriptor), so restores see flat lists.
INDEX_FANOUT = 64


def describe(tracker, r, cs, cur):
    """Cuts a pickled group into hashed chunks and builds its descriptor."""
    pieces = []
    known = set()  # chunks named without their bytes (Go has them)
    pl = []
    data = memoryview(r.data)
    for off in range(0, max(len(data), 1), cs):
        piece = data[off:off + cs]
        h = _hash(piece)
        pl.append([h, len(piece)])
        pieces.append((h, piece, None))
    bl, bch = [], []  # buffer entries, and the chunks each names directly
    size = len(data)
    for j, pb in enumerate(r.buffers):
        entry, children = _buffer(tracker, r, j, pb, cs, pieces, known)
        bl.append(entry)
        bch.append(children)
        size += entry[1]
    desc = {"v": 1, "k": r.kind, "n": list(r.names), "f": r.fmt, "p": pl, "b": bl, "d": list(r.deps)}
    if getattr(r, "arrayless", False):
        desc["m"] = 0  # no array, tensor or figure in this huge graph: the restore skips its memo
    direct = {h for h, _ in pl}  # the descriptor's children
    if len(bl) > INDEX_FANOUT:
        desc["b"], desc["bx"] = [], _index(bl, bch, pieces, lambda run: sum(e[1] for e in run))
        direct.update(h for h, _ in desc["bx"])
    else:
        direct.update(h for c in bch for h in c)
    dj = json.dumps(desc, separators=(",", ":"), sort_keys=True).encode()
    ref = _hash(dj)
    g = _Group(r.names, r.kind)
    g.ref = ref
    g.size = size
    g.ids = r.ids
    g.figs = r.figs
    g.owners = r.owners
    g.chunks = tuple(sorted({h for h, _, _ in pieces} | known))
    pieces.append((ref, dj, sorted(direct)))
    g.types = tuple(_typename(cur[n]) if n in cur else "state" for n in r.names)
    return g, pieces


def _buffer(tracker, r, j, pb, cs, pieces, known):
    """The descriptor entry of out-of-band buffer j and the chunks it names, its chunks appended to
    pieces (a slice whose bytes Go has goes to known instead)."""
    if r.pre is not None and r.pre[j] is not None:  # a slice: one chunk, hashed, bytes only when new
        h, n = r.pre[j]
        if len(pb.raw()) == n:
            pieces.append((h, pb.raw(), None))
        else:
            known.add(h)
        return [1, n, [[h, n]]], (h,)
    try:
        mv = pb.raw()
    except BufferError:
        mv = memoryview(bytes(pb))  # non-contiguous: copy once
    ro = 1 if mv.readonly else 0
    cl = tracker.hashes(mv, cs)  # a tracked buffer's chunks may be shorter than cs
    off = 0
    for h, ln in cl:
        pieces.append((h, mv[off:off + ln], None))
        off += ln
    if len(cl) > INDEX_FANOUT:
        ix = _index([[h, n] for h, n in cl], [(h,) for h, _ in cl], pieces, lambda run: sum(n for _, n in run))
        return [ro, len(mv), [], ix], tuple(h for h, _ in ix)
    return [ro, len(mv), cl], tuple(h for h, _ in cl)


def _index(items, children, pieces, size):
    """Index chunks over a long list, INDEX_FANOUT items each: chunk content the JSON of its items, its
    children those its items name. Appended to pieces after the chunks they list; returns
    [[index hash, size(its items)], ...]: the bytes its chunks or buffers hold."""
    ix = []
    for i in range(0, len(items), INDEX_FANOUT):
        run = items[i:i + INDEX_FANOUT]
        ij = json.dumps(run, separators=(",", ":")).encode()
        hi = _hash(ij)
        pieces.append((hi, ij, sorted({h for c in children[i:i + INDEX_FANOUT] for h in c})))
        ix.append([hi, size(run)])
    return ix


_ZSTD = threading.local()  # one compressor per thread: making one costs more than compressing a small chunk


def _compressor():
    """This thread's zstd compressor (level 1). A new one per chunk cost 16 us for a 4 KB chunk that
    takes 2 us to compress, and 0.5 ms per 1 MiB chunk. One compressor is not to be used by two
    threads at once: the snapshot's and compress_ahead's worker have one each."""
    c = getattr(_ZSTD, "c", None)
    if c is None:
        c = _ZSTD.c = zstandard.ZstdCompressor(level=1)
    return c


_AHEAD = {}  # chunk hash -> (Future of the stored forms of a batch, index in it)
_PENDING = []  # (hash, bytes) not yet handed to the worker
_POOL = []  # (pid, the worker): a forked child makes its own (a fork keeps no threads)
AHEAD_BATCH = 1 << 20  # bytes handed to the worker at a time: each hand-over costs the walk a GIL switch


def compress_ahead(h, piece):
    """Has chunk h (bytes: a slice pickled during a first walk) compressed on a worker thread, so
    that emit finds it done: zstd releases the GIL, and the walk and the pickles go on meanwhile on
    the other core (the first save of a million records spent ~70 ms compressing 37 MB). Chunks go
    to the worker AHEAD_BATCH bytes at a time; those left when the walk ends are compressed by emit.
    A chunk is named by its content, so a result is never stale; forget_ahead drops the rest."""
    if zstandard is None or h in _AHEAD:
        return
    _PENDING.append((h, piece))
    if sum(len(p) for _, p in _PENDING) < AHEAD_BATCH:
        return
    if not _POOL or _POOL[0][0] != os.getpid():
        from concurrent.futures import ThreadPoolExecutor

        _POOL[:] = [(os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="carryover-zstd"))]
    batch = [p for _, p in _PENDING]
    fut = _POOL[0][1].submit(lambda: [_stored(p) for p in batch])
    for j, (hj, _) in enumerate(_PENDING):
        _AHEAD[hj] = (fut, j)
    del _PENDING[:]


def forget_ahead():
    _AHEAD.clear()
    del _PENDING[:]


def _stored(piece):
    """(codec, stored bytes) of a chunk: zstd when that saves a fifth (judged on a probe of SAMPLE
    bytes for a large chunk; a chunk up to twice that, such as a slice of ~64 KiB, is compressed
    whole at once, not probed and compressed again), else raw."""
    raw_len = len(piece)
    if zstandard is not None and raw_len >= 256:
        whole = raw_len <= 2 * SAMPLE
        probe = piece if whole else piece[:SAMPLE]
        c = _compressor().compress(probe)
        if len(c) < 0.8 * len(probe):
            z = c if whole else _compressor().compress(piece)
            if len(z) < raw_len:
                return "zstd", z
    return "raw", piece


def emit(outdir, made, h, piece, children):
    """The chunk's entry for Go (stored as _stored says, or as compress_ahead made it), inline
    when small, else a spool file."""
    raw_len = len(piece)
    ahead = _AHEAD.pop(h, None)
    codec, stored = ahead[0].result()[ahead[1]] if ahead is not None else _stored(piece)
    e = {"h": h, "c": codec, "n": raw_len, "s": len(stored)}
    if children:
        e["ch"] = children
    if len(stored) <= INLINE_MAX:
        e["d"] = base64.b64encode(stored).decode()
    else:
        if not made[0]:
            os.makedirs(outdir, exist_ok=True)
            made[0] = True
        with open(os.path.join(outdir, h), "wb") as f:
            f.write(stored)
        e["f"] = h
    return e

