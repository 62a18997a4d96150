"""Forks and notebooks through the SDK."""

import unittest

import support
from carryover import InvalidRequest, NotFound


class ForkAndNotebook(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = support.client()
        cls.sid = cls.client.create_session().id

    def test_fork_is_independent(self):
        c = self.client
        c.run(self.sid, "items = ['a']")
        fork = c.fork(self.sid, new_session_id=self.sid + "-fork")
        self.assertEqual(fork.id, self.sid + "-fork")
        self.assertEqual(fork.state, "pending")
        c.run(fork.id, "items.append('b')")
        self.assertEqual(c.run(self.sid, "items").result, "['a']")
        self.assertEqual(c.run(fork.id, "items").result, "['a', 'b']")
        with self.assertRaises(NotFound):
            c.fork("no-such-session")
        c.delete_session(fork.id)

    def test_fork_many(self):
        c = self.client
        src = c.create_session().id
        c.run(src, "base = 7")
        with self.assertRaises(InvalidRequest):
            c.fork_many(src, 101)
        kids = c.fork_many(src, 3, new_session_id=src + "-k")
        self.assertEqual([k.id for k in kids], [src + "-k-1", src + "-k-2", src + "-k-3"])
        c.run(kids[0].id, "base = 8")
        self.assertEqual(c.run(kids[1].id, "base").result, "7")
        for sid in [k.id for k in kids] + [src]:
            c.delete_session(sid)

    def test_notebook_out_and_in(self):
        c = self.client
        nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
            {"cell_type": "code", "source": ["total = 0\n", "for i in range(4): total += i"],
             "metadata": {}, "outputs": [], "execution_count": None},
            {"cell_type": "code", "source": "undefined_name", "metadata": {}, "outputs": [], "execution_count": None},
            {"cell_type": "code", "source": "print(total)", "metadata": {}, "outputs": [], "execution_count": None}]}
        out = c.run_notebook(self.sid, nb)
        self.assertEqual((out["ran"], out["stopped_at"]), (2, 1))
        self.assertEqual(out["cells"][1]["result"]["error"]["ename"], "NameError")
        out = c.run_notebook(self.sid, nb, continue_on_error=True)
        self.assertEqual(out["ran"], 3)
        self.assertEqual(out["cells"][2]["result"]["stdout"], "6\n")
        exported = c.get_notebook(self.sid)
        self.assertEqual(exported["nbformat"], 4)
        sources = ["".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                   for cell in exported["cells"]]
        self.assertIn("print(total)", sources)


if __name__ == "__main__":
    unittest.main()
