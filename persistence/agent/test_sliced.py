"""Large containers of records saved in slices (carryover_agent/sliced.py): a changed slice must never
be found clean (that loses data), an unchanged one should not be pickled again, and whatever cannot
be sliced safely (aliased records, nested values, other objects) is pickled whole.

Each save below plays Go: it keeps the chunks in a dict, rebuilds the container from the chunks the
save names and compares it with the live one, so every missed change is a failure."""

import gc
import json
import os
import pickle
import unittest

import numpy as np

import carryover_agent as ca
from carryover_agent.containers import holders, sliced
from test_agent import Harness

N = ca.SLICE_MIN * 3



def rebuild(data, buffers):
    """The value a save's pickle and chunks rebuild, as a restore does. The restore's forget_rebuilt
    follows: the rebuilt containers wait in sliced._REBUILT for the restore's seed, and a test that
    skipped it kept every copy it rebuilt alive (9M objects after one test: the collector's walks
    over them made the nested tests 3x slower, and every later test of the process too). The cyclic
    collector is off meanwhile, as in the restore (restore.py): its passes over the containers the
    load makes cost more than the load."""
    was = gc.isenabled()
    gc.disable()
    try:
        return pickle.loads(data, buffers=buffers)
    finally:
        if was:  # a caller that turned it off keeps it off (test_nested)
            gc.enable()
        sliced.forget_rebuilt()

class _Shell:
    def __init__(self):
        self.user_ns, self.user_ns_hidden, self.last_execution_result = {}, {}, None


class _Saver:
    """One container under one name: saves it, stores the new chunks, loads it back from them."""

    def __init__(self, test, obj):
        self.t = test
        self.agent = ca.Agent(_Shell(), "/nonexistent")
        self.agent.ns["x"] = obj
        self.store = {}

    def save(self, obj=None):
        """Saves ns["x"]; returns the bytes pickled anew (None when not sliced) after checking that
        the chunks rebuild a container equal to the live one."""
        obj = self.agent.ns["x"] if obj is None else obj
        self.agent.state.known = set(self.store)
        out = sliced.pickle_sliced(self.agent, "x", obj, holders.pickle_holder)
        if out is None:
            return None
        data, bufs, pre, ids = out
        fresh = 0
        for pb, (h, n) in zip(bufs, pre):
            raw = pb.raw()
            if len(raw):
                self.t.assertEqual(len(raw), n)
                self.t.assertEqual(ca._hash(raw), h)
                self.store[h] = bytes(raw)
                fresh += n
            self.t.assertIn(h, self.store)
        back = rebuild(data, [self.store[h] for h, _ in pre])
        self.t.assertEqual(type(back), type(obj))
        self.t.assertEqual(back, obj)
        if isinstance(obj, dict):
            self.t.assertEqual(list(back), list(obj))  # order kept
        self.t.assertIn(id(obj), ids)
        return fresh

    def total(self):
        return sum(len(v) for v in self.store.values())


def records(n=N):
    return [{"id": i, "name": str(i), "ok": i % 2 == 0, "score": i * 0.5} for i in range(n)]


class DetectionTest(unittest.TestCase):
    def setUp(self):
        if sliced._memory() is None:
            self.fail("the memory self-test failed on this CPython: slicing is off")

    def assertOneSlice(self, s, fresh):
        self.assertIsNotNone(fresh)
        self.assertGreater(fresh, 0)
        self.assertLessEqual(fresh, 2 * sliced.SLICE_BYTES, "more than one slice pickled again")
        self.assertLess(fresh, s.total() / 5)

    def test_record_edits_are_seen(self):
        lst = records()
        s = _Saver(self, lst)
        self.assertGreater(s.save(), 0)
        self.assertEqual(s.save(), 0)  # nothing changed: nothing pickled
        edits = [lambda: lst[5].__setitem__("name", "five"), lambda: lst[N // 2].pop("ok"),
                 lambda: lst[N - 1].update(extra=1), lambda: lst[7].clear(), lambda: lst[9].setdefault("new", None),
                 lambda: lst[11].popitem(), lambda: lst[13].__delitem__("id"),
                 lambda: lst[3].__setitem__("id", 10 ** 30)]
        for edit in edits:
            edit()
            self.assertOneSlice(s, s.save())

    def test_tuples_of_atoms(self):
        lst = [(i, "t%d" % i, i * 0.5) for i in range(N)]
        s = _Saver(self, lst)
        self.assertGreater(s.save(), 0)
        self.assertEqual(s.save(), 0)
        for i in range(10):
            lst[100] = None  # frees the saved tuple: the next one is allocated where it lay
            lst[100] = (-i, "changed", float(i))
            self.assertOneSlice(s, s.save())
        lst[7] = (1, [2])  # a tuple holding a list: nested, still sliced
        self.assertOneSlice(s, s.save())
        lst[8] = (1, object())  # not JSON-like: not sliced while bound
        self.assertIsNone(s.save())

    def test_same_value_reassigned_is_clean(self):
        lst = records()
        s = _Saver(self, lst)
        s.save()
        lst[5]["name"] = lst[5]["name"]
        self.assertEqual(s.save(), 0)

    def test_items_replaced_at_a_reused_address(self):
        # An immutable item freed and a new one allocated where it lay: the shadow keeps the old one
        # alive, so the address cannot be reused while the agent compares.
        lst = [10 ** 20 + i for i in range(N)]
        s = _Saver(self, lst)
        s.save()
        for i in range(20):
            was = id(lst[100])
            lst[100] = 0  # frees the int saved last time: the next one is allocated where it lay
            lst[100] = int("1000000000000000%04d" % i)
            self.assertOneSlice(s, s.save())
        self.assertNotEqual(id(lst[100]), was, "the shadow did not keep the saved int alive")
        recs = records()
        s = _Saver(self, recs)
        s.save()
        for i in range(20):
            recs[100] = 0
            recs[100] = {"id": -i}
            self.assertOneSlice(s, s.save())

    def test_list_reshaped(self):
        lst = records()
        s = _Saver(self, lst)
        s.save()
        lst.append({"id": -1})
        self.assertOneSlice(s, s.save())
        lst.pop()
        self.assertGreaterEqual(s.save(), 0)
        del lst[N // 2:N // 2 + 10]
        self.assertGreater(s.save(), 0)
        lst.insert(0, {"first": True})
        self.assertGreater(s.save(), s.total() / 3)
        lst.sort(key=lambda r: -r.get("id", 0))
        self.assertIsNotNone(s.save())
        lst.reverse()
        self.assertIsNotNone(s.save())
        lst[:] = lst[:ca.SLICE_MIN]
        self.assertIsNotNone(s.save())

    def test_dict_container(self):
        d = {i: {"id": i, "name": str(i)} for i in range(N)}
        s = _Saver(self, d)
        s.save()
        d[7]["name"] = "seven"
        self.assertOneSlice(s, s.save())
        d[8] = {"replaced": True}
        self.assertOneSlice(s, s.save())
        del d[9]
        d[9] = {"id": 9}  # moves to the end
        self.assertIsNotNone(s.save())
        d["k"] = "atom"
        self.assertOneSlice(s, s.save())
        big = 10 ** 25
        d[big] = 1
        s.save()
        del d[big]
        d[10 ** 25 + 1] = 1  # a key replaced by another at the same position
        self.assertOneSlice(s, s.save())

    def test_record_twice_is_pickled_whole(self):
        lst = records()
        s = _Saver(self, lst)
        s.save()
        lst.append(lst[0])  # slices would restore two records
        self.assertIsNone(s.save())
        lst.pop()
        self.assertIsNotNone(s.save())

    def test_group_of_container_and_its_records(self):
        lst, d = records(), {i: {"i": i} for i in range(N)}
        for cont, keys in ((lst, (5, N - 1)), (d, (7, N - 1))):
            s = _Saver(self, cont)
            s.save()
            rows = [cont[k] for k in keys]
            values = [cont] + rows + [rows[0]]
            s.agent.state.known = set(s.store)
            out = sliced.pickle_sliced_group(s.agent, ["x", "r1", "r2", "r3"], values)
            self.assertIsNotNone(out)
            data, bufs, pre, ids = out
            self.assertTrue(all(len(b.raw()) == 0 for b in bufs))  # nothing changed: nothing pickled
            back = rebuild(data, [s.store[h] for h, _ in pre])
            self.assertEqual(back[0], cont)
            self.assertIs(back[1], back[0][keys[0]])
            self.assertIs(back[2], back[0][keys[1]])
            self.assertIs(back[3], back[1])
            self.assertFalse(ids.isdisjoint({id(rows[0])}))
        other = {"not": "a record of it"}
        self.assertIsNone(sliced.pickle_sliced_group(s.agent, ["c", "o"], [d, other]))
        self.assertIsNone(sliced.pickle_sliced_group(s.agent, ["c", "o"], [d, [1]]))
        self.assertIsNone(sliced.pickle_sliced_group(s.agent, ["a", "b"], [d, lst]))  # two containers

    def test_unsliceable_is_pickled_whole(self):
        deep = [1]
        for _ in range(ca.nested.MAX_DEPTH + 1):
            deep = [deep]
        for bad in ([{"a": [object()]}] + records(N - 1), [object()] + list(range(N)), [[1, {2: {3}}, deep]] + list(range(N)),
                    [{(1, object()): 1}] + records(N - 1)):
            self.assertIsNone(_Saver(self, bad).save())
        lst = records()
        s = _Saver(self, lst)
        s.save()
        lst[3]["nested"] = {"deep": {"er": [1, 2.5, object()]}}
        for _ in range(2):  # the second time: remembered while bound, named again
            sliced.reset_stats()
            self.assertIsNone(s.save())
            self.assertEqual([u["reason"] for u in sliced.STATS["unsliced"]], ["pickled whole: holds a object"])
        self.assertIsNone(_Saver(self, list(range(ca.SLICE_MIN - 1))).save())  # small: whole

    def test_clean_slice_unknown_to_go_is_sent_again(self):
        lst = records()
        s = _Saver(self, lst)
        s.save()
        lost = next(iter(s.store))
        del s.store[lost]  # a commit that failed: Go does not have this chunk
        self.assertGreater(s.save(), 0)
        self.assertIn(lost, s.store)


class IdArrayTest(unittest.TestCase):
    def test_isdisjoint_and_replaced(self):
        a = sliced.IdArray(np, np.array([16, 48, 80, 4096], np.int64))
        self.assertTrue(a.isdisjoint({8, 32, 5000}))  # beyond the largest id too
        self.assertFalse(a.isdisjoint({1, 4096}))
        self.assertFalse(a.isdisjoint({16}))
        self.assertTrue(a.isdisjoint(set()))
        self.assertFalse(a.isdisjoint(a))
        self.assertTrue(sliced.IdArray(np, np.array([], np.int64)).isdisjoint({1}))
        b = a.replaced(np.array([48, 4096]), np.array([20, 9000]))
        self.assertEqual(list(b), [16, 20, 80, 9000])
        self.assertFalse(b.isdisjoint(sliced.IdArray(np, np.array([9000], np.int64))))
        self.assertTrue(b.isdisjoint(sliced.IdArray(np, np.array([48], np.int64))))
        self.assertEqual(list(a), [16, 48, 80, 4096])  # a copy: the committed state keeps its ids
        self.assertTrue(ca.pickling._disjoint({1, 2}, b))
        self.assertFalse(ca.pickling._disjoint({20}, b))  # asked of b, the larger


class _ArraySaver:
    """An object array through pickle_one (the agent's reducers), with a dict of chunks as Go."""

    def __init__(self, test):
        self.t = test
        self.agent = ca.Agent(_Shell(), "/nonexistent")
        self.agent._shared = ca._shared_types()
        self.agent._defnames = {}
        self.store = {}
        ca._library_dispatch()  # the numpy reducers, as each snapshot does

    def save(self, value):
        """Pickles value; returns the bytes of slices pickled anew (None when nothing was sliced)
        after checking that the chunks load back an equal value."""
        self.agent.state.known = set(self.store)
        r = ca.pickle_one(self.agent, ["a"], [value])
        bufs, fresh = [], 0
        for j, pb in enumerate(r.buffers):
            pre = r.pre[j] if r.pre else None
            if pre is None:
                bufs.append(bytes(pb.raw()))
                continue
            if len(pb.raw()):
                self.t.assertEqual(ca._hash(pb.raw()), pre[0])
                self.store[pre[0]] = bytes(pb.raw())
                fresh += pre[1]
            bufs.append(self.store[pre[0]])
        back = pickle.loads(r.data, buffers=bufs)
        self.t.assertEqual(type(back), type(value))
        if isinstance(value, np.ndarray):
            self.t.assertEqual((back.dtype, back.shape), (value.dtype, value.shape))
            self.t.assertEqual(back.tolist(), value.tolist())
        else:
            self.t.assertTrue(back.equals(value))
        return fresh if r.pre else None


class ObjectArrayTest(unittest.TestCase):
    def test_one_item_changed_pickles_one_slice(self):
        a = np.array(["s%d" % i for i in range(N)], dtype=object)
        s = _ArraySaver(self)
        total = s.save(a)
        self.assertGreater(total, 0)
        self.assertEqual(s.save(a), 0)
        a[N // 2] = "changed"
        fresh = s.save(a)
        self.assertGreater(fresh, 0)
        self.assertLessEqual(fresh, 2 * sliced.SLICE_BYTES)
        a[5], a[6] = None, 3.5  # atoms of other types
        self.assertLessEqual(s.save(a), 2 * sliced.SLICE_BYTES)

    def test_item_replaced_at_a_reused_address(self):
        a = np.array([10 ** 20 + i for i in range(N)], dtype=object)
        s = _ArraySaver(self)
        s.save(a)
        for i in range(20):
            a[100] = None  # frees the int saved last time: the next one is allocated where it lay
            a[100] = int("1000000000000000%04d" % i)
            self.assertGreater(s.save(a), 0)

    def test_what_is_not_sliced(self):
        s = _ArraySaver(self)
        with_list = np.array(["x"] * N, dtype=object)
        with_list[3] = [1, 2j]  # complex: no atom
        self.assertIsNone(s.save(with_list))
        base = np.array(["y%d" % i for i in range(2 * N)], dtype=object)
        self.assertIsNone(s.save(base[::2]))  # a view
        self.assertIsNone(s.save(np.array(["z"] * 100, dtype=object)))  # small
        sliced_once = np.array(["w%d" % i for i in range(N)], dtype=object)
        s.save(sliced_once)
        sliced_once[7] = {"no": 3j}
        self.assertIsNone(s.save(sliced_once))

    def test_dataframe_string_column(self):
        import pandas as pd

        df = pd.DataFrame({"id": np.arange(N), "name": ["n%d" % i for i in range(N)], "x": np.arange(N) * 0.5})
        s = _ArraySaver(self)
        self.assertGreater(s.save(df), 0)
        df.loc[7, "name"] = "seven"
        self.assertLessEqual(s.save(df), 2 * sliced.SLICE_BYTES)
        df.loc[8, "x"] = -1.0
        self.assertEqual(s.save(df), 0)

    def test_entries_of_dropped_arrays_are_purged(self):
        from carryover_agent.containers import objarrays

        a = np.array(["p%d" % i for i in range(N)], dtype=object)
        _ArraySaver(self).save(a)
        key = id(a)
        objarrays.purge()
        self.assertIn(key, objarrays._ENTRIES)
        del a
        objarrays.purge()
        self.assertNotIn(key, objarrays._ENTRIES)


class EndToEndTest(unittest.TestCase):
    """Through the snapshot and restore ops with a real IPython shell in a fresh process per kernel."""

    def setUp(self):
        self.h = Harness()

    def tearDown(self):
        self.h.close()

    def assertOneSlice(self, first, cp):
        """cp wrote one slice (plus small chunks: the descriptor, state groups), a fraction of first."""
        sizes = [(c["n"], c["s"]) for c in cp["result"]["chunks"]]
        self.assertEqual(len([n for n, _ in sizes if n > 8192]), 1, sizes)
        self.assertLess(cp["written"], first["written"] / 5, sizes)

    def test_one_record_changed_writes_one_slice_also_after_a_restore(self):
        make = "recs = [{'id': i, 'name': str(i), 'ok': i %% 2 == 0} for i in range(%d)]\nx = 1" % N
        out = self.h.kernel([{"run": make}, {"checkpoint": True}, {"run": "recs[5]['name'] = 'five'"},
                             {"checkpoint": True}, {"run": "row = recs[9]"}, {"checkpoint": True}])
        first, edit, alias = out["steps"][1], out["steps"][3], out["steps"][5]
        self.assertEqual(edit["result"]["saved"], ["recs"])
        self.assertOneSlice(first, edit)
        groups = {tuple(g["n"]) for g in alias["manifest"]["groups"]}
        self.assertIn(("recs", "row"), groups)  # the alias made them one group, still in slices
        self.assertLess(alias["written"], first["written"] / 5)

        out = self.h.kernel([{"run": "row is recs[9]"}, {"run": "row['ok'] = 'via row'"}, {"checkpoint": True},
                             {"run": "del row"}, {"checkpoint": True}, {"run": "recs[20]['ok'] = None"},
                             {"checkpoint": True},
                             {"run": "(recs[5]['name'], recs[20], len(recs), "
                                     "recs[9] == {'id': 9, 'name': '9', 'ok': 'via row'})"}],
                            manifest=alias["manifest"])
        self.assertEqual(out["restore"]["failed"], [])
        self.assertEqual(out["steps"][0], "True")  # the alias came back as the record itself
        self.assertOneSlice(first, out["steps"][2])  # a change through it: one slice
        after = out["steps"][6]
        self.assertEqual(after["result"]["saved"], ["recs"])
        self.assertOneSlice(first, after)
        self.assertEqual(out["steps"][7], "('five', {'id': 20, 'name': '20', 'ok': None}, %d, True)" % N)

        # The seeded caches must describe the restored container exactly: one more kernel from this state.
        out = self.h.kernel([{"run": "recs[20]['ok'], recs[5]['name'], sum(r['id'] for r in recs)"}],
                            manifest=after["manifest"])
        self.assertEqual(out["steps"][0], "(None, 'five', %d)" % (N * (N - 1) // 2))

    def test_many_slices_are_listed_through_index_chunks(self):
        """A container of more than 64 slices: its descriptor lists index chunks of its buffer list
        ("bx"), so a changed record rewrites one slice, one index chunk and a short descriptor; a fresh
        kernel restores it equal, and still writes one slice for the next change."""
        n = 250_000
        make = "recs = [{'id': i, 'name': str(i), 'ok': i %% 2 == 0} for i in range(%d)]" % n
        out = self.h.kernel([{"run": make}, {"checkpoint": True}, {"run": "recs[70_000]['name'] = 'x'"},
                             {"checkpoint": True}])
        first, edit = out["steps"][1], out["steps"][3]
        ref = next(g["r"] for g in edit["manifest"]["groups"] if g["n"] == ["recs"])
        with open(os.path.join(self.h.store, ref), "rb") as f:
            desc = json.loads(f.read())
        self.assertEqual(desc["b"], [])
        self.assertGreater(len(desc["bx"]), 1)
        self.assertOneSlice(first, edit)
        descs = [c["n"] for c in edit["result"]["chunks"] if c["h"] == ref]
        self.assertLess(descs[0], 1024, "the descriptor lists index chunks, not every slice")
        out = self.h.kernel([{"run": "recs[3]['ok'] = None"}, {"checkpoint": True},
                             {"run": "(recs[70_000]['name'], recs[3]['ok'], len(recs), recs[-1]['id'])"}],
                            manifest=edit["manifest"])
        self.assertEqual(out["restore"]["failed"], [])
        self.assertOneSlice(first, out["steps"][1])
        self.assertEqual(out["steps"][2], "('x', None, %d, %d)" % (n, n - 1))

    def test_dataframe_string_column_after_restore(self):
        make = ("import pandas as pd, numpy as np\n"
                "df = pd.DataFrame({'id': np.arange(%d), 'name': ['n%%d' %% i for i in range(%d)]})" % (N, N))
        out = self.h.kernel([{"run": make}, {"checkpoint": True}, {"run": "df.loc[5, 'name'] = 'five'"},
                             {"checkpoint": True}])
        first, edit = out["steps"][1], out["steps"][3]
        self.assertOneSlice(first, edit)
        tm = edit["result"]["timings"]
        self.assertLessEqual(tm["sliced_repickled_bytes"], 2 * sliced.SLICE_BYTES, tm)
        self.assertLess(tm["sliced_repickled_bytes"] * 3, tm["sliced_bytes"], tm)
        out = self.h.kernel([{"run": "df.loc[9, 'name'] = None"}, {"checkpoint": True},
                             {"run": "(df.loc[5, 'name'], df.loc[9, 'name'], df.loc[%d, 'name'], len(df))" % (N - 1)}],
                            manifest=edit["manifest"])
        self.assertEqual(out["restore"]["failed"], [])
        self.assertOneSlice(first, out["steps"][1])
        self.assertEqual(out["steps"][2], "('five', None, 'n%d', %d)" % (N - 1, N))


if __name__ == "__main__":
    unittest.main()
