"""Without websocket-client, everything but streaming works, and streaming says what is missing."""

import os
import subprocess
import sys
import unittest

import support

SCRIPT = r"""
import sys
sys.modules["websocket"] = None  # as if python3-websocket were not installed
import carryover
c = carryover.Carryover(sys.argv[1], sys.argv[2])
assert c.health()
r = c.execute("6 * 7")
assert r.result == "42", r
try:
    c.stream_run("whatever", "1")
except ImportError as e:
    assert "python3-websocket" in str(e), e
    print("ok")
"""


class NoWebsocket(unittest.TestCase):
    def test_http_works_streaming_explains(self):
        src = os.path.join(support.HERE, "..", "src")
        env = dict(os.environ, PYTHONPATH=src)
        out = subprocess.run([sys.executable, "-c", SCRIPT, support.server_url(), support.TOKEN],
                             env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "ok")


if __name__ == "__main__":
    unittest.main()
