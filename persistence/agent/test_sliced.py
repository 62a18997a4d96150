"""Large containers of records saved in slices (carryover_agent/sliced.py): a changed slice must never
be found clean (that loses data), an unchanged one should not be pickled again, and whatever cannot
be sliced safely (aliased records, nested values, other objects) is pickled whole.

Each save below plays Go: it keeps the chunks in a dict, rebuilds the container from the chunks the
save names and compares it with the live one, so every missed change is a failure."""

import pickle
import unittest

import carryover_agent as ca
from carryover_agent import sliced
from test_agent import Harness

N = ca.SLICE_MIN * 3


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
        out = sliced.pickle_sliced(self.agent, "x", obj)
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
        back = pickle.loads(data, buffers=[self.store[h] for h, _ in pre])
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

    def test_aliased_record_is_pickled_whole(self):
        lst = records()
        s = _Saver(self, lst)
        s.save()
        row = lst[5]
        self.assertIsNone(s.save())  # `row is lst[5]` must survive: the group is pickled whole
        del row
        self.assertEqual(s.save(), 0)
        lst.append(lst[0])  # the same record twice
        self.assertIsNone(s.save())
        lst.pop()
        s.agent.ns["Out"] = {3: lst[4]}  # IPython's history holds a record: not an alias
        s.agent.ns["_3"] = lst[4]
        self.assertIsNotNone(s.save())

    def test_unsliceable_is_pickled_whole(self):
        for bad in ([{"a": [1]}] * 1 + records(N - 1), [object()] + list(range(N)), [[1]] + list(range(N))):
            self.assertIsNone(_Saver(self, bad).save())
        lst = records()
        s = _Saver(self, lst)
        s.save()
        lst[3]["nested"] = {"deep": 1}
        self.assertIsNone(s.save())
        self.assertIsNone(s.save())  # remembered while bound
        self.assertIsNone(_Saver(self, list(range(ca.SLICE_MIN - 1))).save())  # small: whole

    def test_clean_slice_unknown_to_go_is_sent_again(self):
        lst = records()
        s = _Saver(self, lst)
        s.save()
        lost = next(iter(s.store))
        del s.store[lost]  # a commit that failed: Go does not have this chunk
        self.assertGreater(s.save(), 0)
        self.assertIn(lost, s.store)


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
        self.assertIn(("recs", "row"), groups)  # the alias made them one group, pickled whole

        out = self.h.kernel([{"run": "del row"}, {"checkpoint": True}, {"run": "recs[20]['ok'] = None"},
                             {"checkpoint": True},
                             {"run": "(recs[5]['name'], recs[20], len(recs), "
                                     "recs[9] == {'id': 9, 'name': '9', 'ok': False})"}],
                            manifest=alias["manifest"])
        self.assertEqual(out["restore"]["failed"], [])
        after = out["steps"][3]
        self.assertEqual(after["result"]["saved"], ["recs"])
        self.assertOneSlice(first, after)
        self.assertEqual(out["steps"][4], "('five', {'id': 20, 'name': '20', 'ok': None}, %d, True)" % N)

        # The seeded caches must describe the restored container exactly: one more kernel from this state.
        out = self.h.kernel([{"run": "recs[20]['ok'], recs[5]['name'], sum(r['id'] for r in recs)"}],
                            manifest=after["manifest"])
        self.assertEqual(out["steps"][0], "(None, 'five', %d)" % (N * (N - 1) // 2))


if __name__ == "__main__":
    unittest.main()
