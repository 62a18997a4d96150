"""Nested records (engine v3, carryover_agent/nested.py and holders.py): a write at any depth of an
item must be found (a missed one loses data), one item's change re-pickles its slice only, aliasing
survives, and what cannot be sliced is pickled whole and named.

Every save plays Go: it keeps the chunks in a dict and rebuilds the container from the chunks the
save names, then compares it with the live one (types, order and identity of shared objects
included). test_detection_off_misses_them runs the mutations with change detection switched off
(nested.NO_DETECTION_ENV) and requires every one of them to be missed: the mutation tests fail then."""

import gc
import os
import pickle
import unittest

import numpy as np

import carryover_agent as ca
from carryover_agent.containers import holders, nested, sliced
from test_agent import Harness
from test_sliced import _ArraySaver, _Shell, rebuild

N = ca.SLICE_MIN * 3


def canon(x):
    """x as nested tuples that compare equal only when types, order (lists, tuples, dicts) and
    contents are equal (sets by sorted members)."""
    t = type(x)
    if t is dict:
        return ("dict", tuple((canon(k), canon(v)) for k, v in x.items()))
    if t in (list, tuple):
        return (t.__name__, tuple(canon(v) for v in x))
    if t in (set, frozenset):
        return (t.__name__, tuple(sorted(repr(canon(v)) for v in x)))
    return (t.__name__, repr(x))


def same(a, b):
    """a equals b, and the items mutations touch (and any dict's key order in them) are exactly
    alike: == ignores dict order and tuple-vs-list inside sets; canon over all is too slow here."""
    if a != b:
        return False
    if type(a) is dict:
        return list(a) == list(b) and (len(a) > 300 or all(same(a[k], b[k]) for k in a))
    if type(a) is list and len(a) > 100:
        near = list(range(40)) + [len(a) // 3 + d for d in (-2, -1, 0, 1)] + [len(a) // 2 + d for d in (-1, 0, 1)]
        return all(canon(a[i]) == canon(b[i]) for i in near + [-2, -1])
    return canon(a) == canon(b)


class _ChunkLoads:
    """The pickle module as sliced._rebuild_sliced sees it while a Saver rebuilds: a chunk's bytes
    (in the store under their hash) load to equal items every time, so each chunk is loaded once and
    its items are reused by every later rebuild that names it. A rebuild still reads every chunk the
    save names: a stale one (a missed mutation) still brings back the stale items. Loading every slice
    at every save had been half of these tests' time."""

    def __init__(self):
        self.loaded = {}  # id(chunk) -> (chunk, its items)

    def loads(self, p):
        hit = self.loaded.get(id(p))
        if hit is None or hit[0] is not p:
            hit = self.loaded[id(p)] = (p, pickle.loads(p))
        return hit[1]

    def __getattr__(self, name):
        return getattr(pickle, name)


class Saver:
    """One value under one name through sliced.pickle_sliced (containers and holders)."""

    def __init__(self, obj):
        self.agent = ca.Agent(_Shell(), "/nonexistent")
        self.agent.ns["x"] = obj
        self.store = {}
        self.chunks = _ChunkLoads()

    def save(self):
        """(bytes pickled anew or None when not sliced, the value rebuilt from the chunks)."""
        obj = self.agent.ns["x"]
        self.agent.state.known = set(self.store)
        sliced.reset_stats()
        out = sliced.pickle_sliced(self.agent, "x", obj, holders.pickle_holder)
        if out is None:
            return None, None
        data, bufs, pre, ids = out
        fresh = 0
        for pb, (h, n) in zip(bufs, pre):
            raw = pb.raw()
            if len(raw):
                assert ca._hash(raw) == h
                self.store[h] = bytes(raw)
                fresh += n
        sliced.pickle = self.chunks
        try:
            back = rebuild(data, [self.store[h] for h, _ in pre])
        finally:
            sliced.pickle = pickle
        return fresh, back


def nested_rows(n=N):
    return [{"id": i, "name": "n%d" % i, "v": [i, i + 1], "meta": {"k": i, "tags": ["a", "b"], "deep": {"x": [i]}},
             "s": {i, -i}, "t": (i, "t"), "ft": frozenset((i,))} for i in range(n)]


def irregular_rows(n=N):
    """nested_rows whose records are not all alike, so the walk reads them by every path of its
    dict tables (nested.py): some with another key, some with a key deleted (a hole in the table),
    an int-keyed dict, a column holding None or a list."""
    rows = nested_rows(n)
    for i, r in enumerate(rows):
        if i % 3 == 0:
            r["x%d" % (i % 5)] = [i]
        if i % 4 == 1:
            r["tmp"] = 0
            del r["tmp"]
            del r["meta"]["deep"]["x"]
            r["meta"]["deep"]["x"] = [i]
        r["opt"] = None if i % 2 else [i, {"o": i}]
        r["ints"] = {i: [i], -i - 1: "y"}
    return rows


# (label, mutation): each is applied to nested_rows() in turn and must be seen.
MUTATIONS = [
    ("dict value", lambda r: r[5]["meta"].__setitem__("k", -5)),
    ("dict value two levels down", lambda r: r[N // 2]["meta"]["deep"].__setitem__("x", "gone")),
    ("list element", lambda r: r[7]["v"].__setitem__(0, -1)),
    ("list element, large int at a reused address", lambda r: (r[8]["v"].__setitem__(0, None),
                                                                 r[8]["v"].__setitem__(0, 10 ** 20 + 8))),
    ("list element three levels down", lambda r: r[9]["meta"]["deep"]["x"].__setitem__(0, 99.5)),
    ("list in a list", lambda r: r[10]["meta"]["tags"].append(["x"])),
    ("list in a list, element", lambda r: r[10]["meta"]["tags"][-1].__setitem__(0, "y")),
    ("set member added", lambda r: r[11]["s"].add(10 ** 30)),
    ("set member removed", lambda r: r[12]["s"].discard(-12)),
    ("set replaced by an equal-sized one", lambda r: (r[13]["s"].clear(), r[13]["s"].update({1, 2}))),
    ("tuple replaced", lambda r: r[14].__setitem__("t", (14, "replaced"))),
    ("tuple holding a list, list changed", lambda r: (r[15].__setitem__("t", (1, [2])), None)),
    ("list inside a tuple", lambda r: r[15]["t"][1].append(3)),
    ("key added", lambda r: r[16]["meta"].__setitem__("new", [1])),
    ("key removed", lambda r: r[17]["meta"].pop("tags")),
    ("key removed and added back", lambda r: r[18]["meta"].__setitem__("k", r[18]["meta"].pop("k"))),
    ("frozenset replaced", lambda r: r[19].__setitem__("ft", frozenset((1, 2)))),
    ("item appended", lambda r: r.append({"id": -1, "v": [[]]})),
    ("item removed", lambda r: r.pop(N // 3)),
    ("items reordered", lambda r: r.__setitem__(slice(20, 22), [r[21], r[20]])),
    ("item replaced by a list", lambda r: r.__setitem__(23, [1, {"a": 2}])),
    ("list emptied", lambda r: r[24]["v"].clear()),
]
IN_PLACE = {"dict value", "dict value two levels down", "list element", "list element three levels down",
            "set member added", "set member removed", "key added", "key removed", "list inside a tuple"}


class NestedTest(unittest.TestCase):
    def setUp(self):
        if sliced._memory() is None:
            self.fail("the memory self-test failed on this CPython: slicing is off")
        # The cyclic collector is off, as in the agent's ops (agent.py): with it on, its passes over
        # the half million objects of every rebuilt copy had been a quarter of these tests' time.
        gc.disable()
        self.addCleanup(gc.enable)

    def run_mutations(self, make=nested_rows):
        """Applies MUTATIONS in turn; returns the labels of those the saved value missed."""
        rows = make()
        s = Saver(rows)
        fresh, back = s.save()
        self.assertGreater(fresh, 0)
        self.assertTrue(same(back, rows))
        missed = []
        self.append_fills = False  # the appended item starts a new slice (pickled as new, not detected)
        for label, mutate in MUTATIONS:
            if label == "item appended":
                self.append_fills = len(rows) % s.agent._sliced["x"].k == 0
            mutate(rows)
            fresh, back = s.save()
            self.assertIsNotNone(fresh, label)
            if not same(back, rows):
                missed.append(label)
            elif label in IN_PLACE:
                self.assertLessEqual(fresh, 2 * sliced.SLICE_BYTES, "%s: more than one slice pickled again" % label)
        return missed

    def test_mutation_at_every_depth_is_seen(self):
        self.assertEqual(self.run_mutations(), [])

    def test_mutation_at_every_depth_of_irregular_records_is_seen(self):
        self.assertEqual(self.run_mutations(irregular_rows), [])

    def test_detection_off_misses_them(self):
        """The switch turns the detection off: every mutation above must then be missed, which is
        what makes test_mutation_at_every_depth_is_seen a test of the detection."""
        for make in (nested_rows, irregular_rows):
            os.environ[nested.NO_DETECTION_ENV] = "1"
            try:
                missed = self.run_mutations(make)
            finally:
                del os.environ[nested.NO_DETECTION_ENV]
            self.assertEqual(missed, [label for label, _ in MUTATIONS if not (label == "item appended" and self.append_fills)])

    def test_unchanged_pickles_nothing(self):
        rows = nested_rows()
        s = Saver(rows)
        s.save()
        self.assertEqual(s.save()[0], 0)
        rows[3]["meta"]["k"] = rows[3]["meta"]["k"]  # the same object again
        self.assertEqual(s.save()[0], 0)

    def test_fingerprints_walked_anew_stay_right(self):
        """Many turns of edits: the keep grows until the fingerprints are walked anew; edits are
        still seen after that."""
        rows = nested_rows()
        s = Saver(rows)
        s.save()
        for i in range(2 * nested.MAX_DEPTH):
            for j in range(0, N, N // 7):
                rows[j]["v"][1] = 10 ** 21 + i
            fresh, back = s.save()
            self.assertTrue(same(back, rows), i)
        for j in range(N // 2):  # most slices dirty: walked anew
            rows[j]["v"].append(j)
        self.assertTrue(same(s.save()[1], rows))
        rows[N - 1]["meta"]["deep"]["x"][0] = "last"
        fresh, back = s.save()
        self.assertLessEqual(fresh, 2 * sliced.SLICE_BYTES)
        self.assertTrue(same(back, rows))

    def test_dict_of_records(self):
        d = {"id%d" % i: {"name": "n%d" % i, "tags": ["t"], "attrs": {"a": [i]}} for i in range(N)}
        s = Saver(d)
        s.save()
        d["id7"]["attrs"]["a"][0] = -7
        fresh, back = s.save()
        self.assertLessEqual(fresh, 2 * sliced.SLICE_BYTES)
        self.assertTrue(same(back, d))

    def test_holder_slices_its_big_list(self):
        """api = {'items': [...], ...}: the big list inside a small dict is sliced, the small dict is not
        pickled whole; a change deep in one item re-pickles one slice."""
        api = {"total": N, "items": [{"id": i, "tags": ["x", "y"], "meta": {"k": i}} for i in range(N)],
               "page": {"next": None, "data": {"rows": [[i, str(i)] for i in range(N)]}}}
        s = Saver(api)
        fresh, back = s.save()
        self.assertGreater(fresh, 0)
        self.assertTrue(same(back, api))
        self.assertEqual(s.save()[0], 0)
        api["items"][100]["meta"]["k"] = -5
        fresh, back = s.save()
        self.assertGreater(fresh, 0)
        self.assertLessEqual(fresh, 2 * sliced.SLICE_BYTES)
        self.assertTrue(same(back, api))
        api["page"]["data"]["rows"][5][1] = "five"  # two levels down
        api["total"] = -1  # the small part
        fresh, back = s.save()
        self.assertLessEqual(fresh, 2 * sliced.SLICE_BYTES)
        self.assertTrue(same(back, api))
        api["items"] = api["items"][:N - 1]  # rebound: a new container under the same path
        self.assertTrue(same(s.save()[1], api))

    def test_aliasing_across_items_is_pickled_whole_and_named(self):
        rows = nested_rows()
        s = Saver(rows)
        s.save()
        shared = [1, 2]
        rows[10]["w"], rows[N - 10]["w"] = shared, shared
        self.assertIsNone(s.save()[0])
        self.assertEqual(sliced.STATS["unsliced"][0]["name"], "x")
        self.assertIn("twice", sliced.STATS["unsliced"][0]["reason"])
        del rows[N - 10]["w"]
        fresh, back = s.save()
        self.assertIsNotNone(fresh)
        self.assertTrue(same(back, rows))

    def test_irregular_is_named(self):
        class Thing:
            pass

        rows = nested_rows()
        rows[3]["meta"]["deep"]["x"].append(Thing())
        s = Saver(rows)
        self.assertIsNone(s.save()[0])
        self.assertEqual(sliced.STATS["unsliced"], [{"name": "x", "type": "list", "reason": "pickled whole: holds a Thing"}])
        self.assertIsNone(s.save()[0])  # remembered while bound, named again
        self.assertEqual(len(sliced.STATS["unsliced"]), 1)

    def test_names_bound_inside_items(self):
        """A group of the container and names bound to containers nested in its items: still sliced,
        each name pickled as a path into the container, so it is the same object after a load."""
        rows = nested_rows()
        s = Saver(rows)
        s.save()
        tags, deep = rows[5]["meta"]["tags"], rows[N - 1]["meta"]["deep"]
        s.agent.state.known = set(s.store)
        out = sliced.pickle_sliced_group(s.agent, ["rows", "tags", "deep"], [rows, tags, deep])
        self.assertIsNotNone(out)
        data, bufs, pre, ids = out
        for pb, (h, n) in zip(bufs, pre):
            if len(pb.raw()):
                s.store[h] = bytes(pb.raw())
        back = rebuild(data, [s.store[h] for h, _ in pre])
        self.assertIs(back[1], back[0][5]["meta"]["tags"])
        self.assertIs(back[2], back[0][N - 1]["meta"]["deep"])
        self.assertFalse(ids.isdisjoint({id(tags)}))  # the name's list joins the container's group


def reference_walk(m, items, top_dicts):
    """The fingerprint entries nested.walk must record, found by plain recursion: dicts (pointer,
    tag, owner), lists (pointer, item pointers, owner), sets (pointer, mask, owner)."""
    d, lst, s = [], [], []

    def visit(x, own, top):
        t = type(x)
        if t is dict:
            if not top or top_dicts:
                d.append((id(x), m.word(id(x), m.DICT_TAG), own))
            kids = [k for k in x if type(k) in (tuple, frozenset)] + list(x.values())
        elif t in (list, tuple, set, frozenset):
            kids = list(x)
        else:
            return
        if t is list:
            lst.append((id(x), tuple(map(id, x)), own))
        elif t is set:
            s.append((id(x), m.word(id(x), m.SET_MASK), own))
        for k in kids:
            visit(k, own, False)

    for i, x in enumerate(items):
        visit(x, i, True)
    return sorted(d), sorted(lst), sorted(s)


def walked(fp):
    """fp's entries as reference_walk lists them."""
    lists = [(int(p), tuple(fp.litems[o:o + n].tolist()), int(w))
             for p, n, o, w in zip(fp.lptr, fp.lsize, fp.loff, fp.lown)]
    return (sorted(zip(fp.dptr.tolist(), fp.dtag.tolist(), fp.down.tolist())), sorted(lists),
            sorted(zip(fp.sptr.tolist(), fp.smask.tolist(), fp.sown.tolist())))


class WalkTest(unittest.TestCase):
    """nested.walk reads dict tables, sizes and items with numpy and fetches containers column by
    column: it must record exactly what a plain recursion finds, whatever the records' shape."""

    def setUp(self):
        self.m = sliced._memory()
        if self.m is None:
            self.fail("the memory self-test failed on this CPython: slicing is off")

    def check(self, items, top_dicts=True):
        m = self.m
        fp = nested.walk(m, items, m.list_ptrs(items), np.arange(len(items), dtype=np.int64), top_dicts)
        self.assertEqual(walked(fp), reference_walk(m, items, top_dicts))
        return fp

    def test_shapes(self):
        class Obj:
            def __init__(self, i):
                self.a, self.b = i, [i]

        shared = [1, 2]
        cases = {
            "split tables": [{"o": vars(Obj(i)), "p": {"q": [i]}} for i in range(30)],
            "records": nested_rows(500),
            "irregular records": irregular_rows(500),
            "tuple keys": [{(i, "k"): [i], "a": {frozenset((i,)): {i}}} for i in range(50)],
            "mixed column": [{"v": [i] if i % 3 else ({"d": [i]} if i % 2 else None)} for i in range(60)],
            "same keys, other order": [{"a": [i], "b": {}} if i % 2 else {"b": {}, "a": [i]} for i in range(40)],
            "empty containers": [{}, [], (), set(), frozenset(), {"e": {}}, [[], {}]] * 5,
            "atoms and containers": [i if i % 2 else [i, (i, [i])] for i in range(100)],
            "shared list": [{"s": shared}, {"s": shared}, shared],
            "deep": [[[[{"x": [[{"y": {1}}]]}]]]],
        }
        block = nested.BLOCK
        try:
            for label, items in cases.items():
                for top, nested.BLOCK in ((True, block), (False, block), (True, 7)):  # 7: blocks end mid-shape
                    with self.subTest(label, top_dicts=top, block=nested.BLOCK):
                        self.check(items, top)
        finally:
            nested.BLOCK = block

    def test_merge(self):
        """A dirty item walked again and merged: written in place when its shape is kept, rebuilt
        when not; either way the fingerprint is what a walk of the items finds now."""
        m = self.m
        for label, edit in (("same shape", lambda r: r[3]["meta"]["deep"].__setitem__("x", [-3])),
                            ("list grown", lambda r: r[3]["v"].append(9)),
                            ("set grown", lambda r: r[3]["s"].update(range(100, 140))),
                            ("dict added", lambda r: r[3].__setitem__("new", {"a": [1]}))):
            with self.subTest(label):
                rows = irregular_rows(50)
                owners = np.arange(50, dtype=np.int64)
                fp = nested.walk(m, rows, m.list_ptrs(rows), owners)
                edit(rows)
                pos = np.arange(2, 5, dtype=np.int64)
                dirty = [rows[i] for i in pos.tolist()]
                fresh = nested.walk(m, dirty, m.list_ptrs(dirty), pos)
                drop = np.zeros(50, bool)
                drop[pos] = True
                merged, gone, added = nested.merge(np, fp, fresh, drop)
                self.assertEqual(merged is fp, label == "same shape")
                self.assertEqual(walked(merged), reference_walk(m, rows, True))

    def test_irregular_values(self):
        class Thing:
            pass

        for items, why in (([{"a": [1, Thing()]}], "holds a Thing"), ([{"a": {Thing(): 1}}] * 2, "a key is a Thing"),
                           ([{"a": 1}, {"b": {("t", Thing()): 1}}], "holds a Thing"),
                           ([[[[[[[[[[[1]]]]]]]]]]], "nested deeper than %d levels" % nested.MAX_DEPTH)):
            with self.subTest(why):
                with self.assertRaises(nested.Irregular) as e:
                    self.check(items)
                self.assertEqual(e.exception.args[0], why)


class JSONColumnTest(unittest.TestCase):
    def test_json_column_one_cell_changed(self):
        import pandas as pd

        df = pd.DataFrame({"id": np.arange(N), "doc": [{"k": i, "tags": ["a", "b"]} for i in range(N)]})
        s = _ArraySaver(self)
        self.assertGreater(s.save(df), 0)
        self.assertEqual(s.save(df), 0)
        df.loc[7, "doc"]["tags"].append("c")  # a write inside a cell: no pointer of the array changes
        fresh = s.save(df)
        self.assertGreater(fresh, 0)
        self.assertLessEqual(fresh, 2 * sliced.SLICE_BYTES)
        df.at[9, "doc"] = [1, [2, 3]]
        self.assertLessEqual(s.save(df), 2 * sliced.SLICE_BYTES)

    def test_json_column_cell_shared_is_pickled_whole(self):
        a = np.empty(N, dtype=object)
        a[:] = [[i] for i in range(N)]
        a[N - 1] = a[0]
        self.assertIsNone(_ArraySaver(self).save(a))


class EndToEndTest(unittest.TestCase):
    """Through the snapshot and restore ops with a real IPython shell in a fresh process per kernel."""

    def setUp(self):
        self.h = Harness()

    def tearDown(self):
        self.h.close()

    def test_restored_nested_container_keeps_detecting(self):
        make = ("rows = [{'id': i, 'v': [i, i + 1], 'meta': {'k': i, 's': {i}}} for i in range(%d)]\n"
                "api = {'n': 1, 'items': [{'t': ['x'], 'm': {'k': i}} for i in range(%d)]}\n"
                "tags = rows[3]['v']" % (N, N))
        out = self.h.kernel([{"run": make}, {"checkpoint": True}, {"run": "rows[7]['v'][0] = -1"}, {"checkpoint": True}])
        first, edit = out["steps"][1], out["steps"][3]
        tm = edit["result"]["timings"]
        self.assertLessEqual(tm["sliced_repickled_bytes"], 2 * sliced.SLICE_BYTES, tm)
        self.assertLess(edit["written"], first["written"] / 20)
        out = self.h.kernel([{"run": "rows[9]['meta']['s'].add(-1); api['items'][100]['m']['k'] = -5"}, {"checkpoint": True},
                             {"run": "(tags is rows[3]['v'], rows[7]['v'], sorted(rows[9]['meta']['s']), "
                                     "api['items'][100], len(rows), len(api['items']))"}],
                            manifest=edit["manifest"])
        self.assertEqual(out["restore"]["failed"], [])
        tm = out["steps"][1]["result"]["timings"]
        self.assertLessEqual(tm["sliced_repickled_bytes"], 4 * sliced.SLICE_BYTES, tm)  # one slice of each
        self.assertEqual(out["steps"][2], "(True, [-1, 8], [-1, 9], {'t': ['x'], 'm': {'k': -5}}, %d, %d)" % (N, N))
        out = self.h.kernel([{"run": "(rows[9]['meta']['s'], api['items'][100]['m'], api['n'])"}],
                            manifest=out["steps"][1]["manifest"])
        self.assertEqual(out["steps"][0], "({9, -1}, {'k': -5}, 1)")


if __name__ == "__main__":
    unittest.main()
