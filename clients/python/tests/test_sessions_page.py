"""GET /api/sessions in pages: list_sessions_page and iter_sessions."""

import unittest
import uuid

import support
from carryover import InvalidRequest


class SessionPages(unittest.TestCase):
    def test_pages_walk_every_session_once_in_order(self):
        client = support.client()
        prefix = "pg-" + uuid.uuid4().hex[:8]
        made = [client.create_session(session_id="%s-%d" % (prefix, i)).id for i in range(5)]

        mine = [s.id for s in client.iter_sessions(page_size=2) if s.id.startswith(prefix)]
        self.assertEqual(mine, made)
        newest = [s.id for s in client.iter_sessions(page_size=2, newest=True) if s.id.startswith(prefix)]
        self.assertEqual(newest, list(reversed(made)))

        page, cursor = client.list_sessions_page(limit=1, newest=True)
        self.assertEqual(len(page), 1)
        self.assertIsNotNone(cursor)
        with self.assertRaises(InvalidRequest):
            client.list_sessions_page(limit=2, cursor="not-a-cursor")


if __name__ == "__main__":
    unittest.main()
