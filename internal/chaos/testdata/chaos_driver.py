"""A chaos-harness driver (internal/chaos/drivers_test.go) over the Python client: reads one JSON
request a line from stdin, {"sid": ..., "code": ...}, runs the code on the session with
Carryover.run (its own key and retries, nothing of the driver's) and writes one JSON line: the
answer's status, stdout, checkpoint_error and restore's files_ahead, or the error's code and text.

Usage: chaos_driver.py BASE_URL TOKEN"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "clients", "python", "src"))

from carryover import Carryover  # noqa: E402


def main():
    c = Carryover(sys.argv[1], auth_token=sys.argv[2], retry_seconds=120)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            r = c.run(req["sid"], req["code"])
            out = {"status": r.status, "stdout": r.stdout, "checkpoint_error": r.checkpoint_error or "",
                   "files_ahead": (r.restore or {}).get("files_ahead") or []}
        except Exception as e:  # noqa: BLE001 - every failure goes back to the harness, named
            out = {"code": getattr(e, "code", "") or type(e).__name__, "error": str(e)}
            res = getattr(e, "result", None)
            if res is not None and getattr(res, "restore", None):
                out["files_ahead"] = res.restore.get("files_ahead") or []
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
