"""Export and import of a session through the SDK."""

import os
import tempfile
import unittest

import support
from carryover import InvalidRequest


class Portable(unittest.TestCase):
    def test_export_then_import(self):
        c = support.client()
        sid = c.create_session().id
        c.run(sid, "rows = [{'a': i} for i in range(3)]\nopen('f.txt', 'w').write('kept')")
        with tempfile.TemporaryDirectory() as d:
            path = c.export_session(sid, os.path.join(d, "s.carryover.tar"))
            res = c.import_session(path, new_session_id=sid + "-imported")
            self.assertEqual(res["session"]["id"], sid + "-imported")
            self.assertEqual(res["source"]["session_id"], sid)
            self.assertEqual(c.run(res["session"]["id"], "print(rows[2], open('f.txt').read())").stdout,
                             "{'a': 2} kept\n")
            with open(path, "rb") as f:
                data = f.read()
        with self.assertRaises(InvalidRequest) as e:
            c.import_session(data[: len(data) // 2])
        self.assertEqual(e.exception.details["reason"], "truncated")
        self.assertEqual(c.export_session(sid)[:len("carryover/index.json")], b"carryover/index.json")
        c.delete_session(res["session"]["id"])

    def test_events_travel_when_asked(self):
        c = support.client()
        sid = c.create_session().id
        c.run(sid, "x = 1")
        with tempfile.TemporaryDirectory() as d:
            path = c.export_session(sid, os.path.join(d, "e.carryover.tar"), events=True)
            src = c.events(sid)  # the log as the export read it
            self.assertGreaterEqual(len(src), 2)
            res = c.import_session(path, new_session_id=sid + "-ev")
        self.assertEqual(res["events"], len(src))
        got = c.events(sid + "-ev")
        tail = got[len(got) - len(src):]  # the new session's own events come first
        self.assertEqual([(e.event_type, e.created_at) for e in tail],
                         [(e.event_type, e.created_at) for e in src])
        plain = c.import_session(c.export_session(sid), new_session_id=sid + "-plain")
        self.assertEqual(plain["events"], 0)
        for s in (sid + "-ev", sid + "-plain", sid):
            c.delete_session(s)


if __name__ == "__main__":
    unittest.main()
