"""Load for the rolling-upgrade test (server/clustertest/rolling_test.go): N sessions, each turn
of a round appends the round's number to the session's list L, rounds in a loop until STOPFILE
exists. Runs go through the SDK as an agent loop would, with no retry code of their own.

Usage: load_driver.py BASE_URL TOKEN PREFIX N STOPFILE
Prints "ready", "round R" after each round, "fail SID R ERROR" for a turn that raised, and at the
end "final SID {"L": [...], "v": "..."}" for each session."""

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from carryover import Carryover  # noqa: E402


def say(*a):
    print(*a, flush=True)


def main():
    base, token, prefix, n, stop = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    c = Carryover(base, auth_token=token, retry_seconds=120)
    ids = ["%s-%d" % (prefix, i) for i in range(n)]
    for sid in ids:
        c.create_session(sid)
        c.run(sid, "L = []\nv = %r" % ("kept-" + sid))
    say("ready")

    def turn(sid, r):
        try:
            c.run(sid, "L.append(%d)" % r)
        except Exception as e:  # the test fails on any
            say("fail", sid, r, repr(e).replace("\n", " "))

    with ThreadPoolExecutor(n) as pool:
        r = 0
        while not os.path.exists(stop):
            list(pool.map(lambda sid: turn(sid, r), ids))
            say("round", r)
            r += 1
    for sid in ids:
        out = c.run(sid, "import json; print(json.dumps({'L': L, 'v': v}))").stdout.strip()
        say("final", sid, out)


if __name__ == "__main__":
    main()
