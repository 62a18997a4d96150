"""Runs turns through the Python SDK while the Go test (python_test.go) kills the server with -9
and restarts it. Each turn appends its number to the session's list L; the test checks that L
ends as 0..n-1: no turn lost, none run twice.

Usage: restart_driver.py BASE_URL TOKEN SESSION_ID N SLOW_TURN
Prints "turn I" before turn I, "done I" after it, "interrupted I" when the SDK raised
RunInterrupted (the first attempt was cut off mid-cell), and finally "L <json>"."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from carryover import Carryover, RunInterrupted  # noqa: E402


def say(*a):
    print(*a, flush=True)


def main():
    base, token, sid, n, slow = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    c = Carryover(base, auth_token=token, retry_seconds=120)
    c.create_session(sid)
    c.run(sid, "L = []")
    say("ready")
    for i in range(n):
        say("turn", i)
        code = "import pathlib, time\nL.append(%d)\npathlib.Path('started-%d').write_text('x')\n" % (i, i)
        if i == slow:
            code += "time.sleep(3)\n"
        try:
            c.run(sid, code)
        except RunInterrupted:
            # The server died mid-cell: the turn's effects are in L only if its checkpoint committed.
            say("interrupted", i)
            if c.run(sid, "print(%d in L)" % i).stdout.strip() != "True":
                c.run(sid, code)
        say("done", i)
    say("L", json.dumps(json.loads(c.run(sid, "import json; print(json.dumps(L))").stdout)))


if __name__ == "__main__":
    main()
