"""The spool side of a snapshot: a pickled group cut into hashed chunks plus its descriptor (the one
chunk the manifest names), and each new chunk handed to Go, zstd-compressed when that pays, inline
(base64) when small or as a file <spool>/<token>/<hash>."""

import base64
import json
import os

from .common import INLINE_MAX, SAMPLE, _hash, _typename, zstandard
from .groups import _Group


# A buffer of more chunks than this lists them in index chunks of this many each, and the descriptor
# lists the index chunks: a turn that writes one chunk of a 1 GiB array then writes a new index chunk
# of 64 entries and a descriptor of 16, not a descriptor of 1,024 (whose edges the store records
# again each time). Go expands the index chunks when it reads a descriptor (expandDescriptor).
INDEX_FANOUT = 64


def describe(tracker, r, cs, cur):
    """Cuts a pickled group into hashed chunks and builds its descriptor."""
    pieces = []
    known = set()  # chunks named without their bytes (Go has them)
    direct = set()  # the descriptor's children
    pl = []
    data = memoryview(r.data)
    for off in range(0, max(len(data), 1), cs):
        piece = data[off:off + cs]
        h = _hash(piece)
        pl.append([h, len(piece)])
        pieces.append((h, piece, None))
        direct.add(h)
    bl = []
    size = len(data)
    for j, pb in enumerate(r.buffers):
        if r.pre is not None and r.pre[j] is not None:  # a slice: one chunk, hashed, bytes only when new
            h, n = r.pre[j]
            if len(pb.raw()) == n:
                pieces.append((h, pb.raw(), None))
            else:
                known.add(h)
            bl.append([1, n, [[h, n]]])
            direct.add(h)
            size += n
            continue
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
            ix = _index(cl, pieces)
            bl.append([ro, len(mv), [], ix])
            direct.update(h for h, _ in ix)
        else:
            bl.append([ro, len(mv), cl])
            direct.update(h for h, _ in cl)
        size += len(mv)
    desc = {"v": 1, "k": r.kind, "n": list(r.names), "f": r.fmt, "p": pl, "b": bl, "d": list(r.deps)}
    dj = json.dumps(desc, separators=(",", ":"), sort_keys=True).encode()
    ref = _hash(dj)
    g = _Group(r.names, r.kind)
    g.ref = ref
    g.size = size
    g.ids = r.ids
    g.chunks = tuple(sorted({h for h, _, _ in pieces} | known))
    pieces.append((ref, dj, sorted(direct | known)))
    g.types = tuple(_typename(cur[n]) if n in cur else "state" for n in r.names)
    return g, pieces


def _index(cl, pieces):
    """Index chunks of a long chunk list, each [[hash, len], ...] of INDEX_FANOUT chunks, appended to
    pieces after the chunks they list; returns [[index hash, bytes listed], ...]."""
    ix = []
    for i in range(0, len(cl), INDEX_FANOUT):
        run = [[h, n] for h, n in cl[i:i + INDEX_FANOUT]]
        ij = json.dumps(run, separators=(",", ":")).encode()
        hi = _hash(ij)
        pieces.append((hi, ij, sorted({h for h, _ in run})))
        ix.append([hi, sum(n for _, n in run)])
    return ix


_ZSTD = []  # one compressor for the process: making one costs more than compressing a small chunk


def _compressor():
    """The agent's zstd compressor (level 1). A new one per chunk cost 16 us for a 4 KB chunk that
    takes 2 us to compress, and 0.5 ms per 1 MiB chunk; snapshots run on one thread, so one is enough."""
    if not _ZSTD:
        _ZSTD.append(zstandard.ZstdCompressor(level=1))
    return _ZSTD[0]


def emit(outdir, made, h, piece, children):
    raw_len = len(piece)
    codec, stored = "raw", piece
    if zstandard is not None and raw_len >= 256:
        probe = piece if raw_len <= SAMPLE else piece[:SAMPLE]
        c = _compressor().compress(probe)
        if len(c) < 0.8 * len(probe):
            z = c if raw_len <= SAMPLE else _compressor().compress(piece)
            if len(z) < raw_len:
                codec, stored = "zstd", z
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

