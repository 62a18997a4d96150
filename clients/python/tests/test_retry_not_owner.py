"""A 421 (not_owner: the session just moved, a node drained) is retried at once; a 503 backs off."""

import http.server
import json
import threading
import time
import unittest
from unittest import mock

import carryover


def fake(first_status):
    """A server answering first_status to the first request, then a run's answer; it records when
    each request came."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            seen.append(time.monotonic())
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if len(seen) == 1:
                status, body = first_status, {"error": {"code": "x", "message": "not now"}}
            else:
                status, body = 200, {"status": "ok", "stdout": "hi", "outputs": []}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


class RetryNotOwner(unittest.TestCase):
    def sleeps(self, status):
        """The waits the client slept between the attempts of one run answered status then 200."""
        srv, seen = fake(status)
        slept = []
        try:
            c = carryover.Carryover("http://127.0.0.1:%d" % srv.server_port, "t")
            with mock.patch("carryover.client.time.sleep", slept.append):
                c.request("POST", "/api/sessions/s/run", {"code": "1"}, headers={"Idempotency-Key": "k"})
        finally:
            srv.shutdown()
        self.assertEqual(len(seen), 2)
        return slept

    def test_421_at_once_503_after_backoff(self):
        self.assertEqual(self.sleeps(421), [])
        waits = self.sleeps(503)
        self.assertEqual(len(waits), 1)
        self.assertGreaterEqual(waits[0], 0.05)


if __name__ == "__main__":
    unittest.main()
