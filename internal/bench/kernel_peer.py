"""Peer for `carryover-bench` (section "kernel"): the same measurements through Debian's jupyter_client.

Run with the Debian interpreter (/usr/bin/python3). It reads one JSON command per line on stdin and
answers one JSON line on stdout, so the Go side can interleave blocks of ours and theirs (machine load
drifts; interleaving keeps the comparison fair):

  {"cmd": "spawn", "transport": "ipc"}  -> {"ms": t}  KernelManager.start_kernel + client + wait_for_ready
  {"cmd": "open", "transport": "tcp"}   -> {"ok": true}  start the kernel used by "rt"
  {"cmd": "rt", "n": 50}                -> {"ms": [...]}  execute("1+1") until BOTH execute_reply and idle
  {"cmd": "close"}                      -> {"ok": true}
"""

import json
import sys
import time

from jupyter_client.manager import KernelManager


def start(transport):
    km = KernelManager(kernel_name="python3", transport=transport)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def stop(km, kc):
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def round_trip(kc):
    t = time.perf_counter()
    msg_id = kc.execute("1+1")
    idle = reply = False
    while not (idle and reply):
        if not idle:
            m = kc.get_iopub_msg(timeout=30)
            if (
                m["parent_header"].get("msg_id") == msg_id
                and m["msg_type"] == "status"
                and m["content"]["execution_state"] == "idle"
            ):
                idle = True
        else:
            m = kc.get_shell_msg(timeout=30)
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "execute_reply":
                reply = True
    return (time.perf_counter() - t) * 1000


def main():
    km = kc = None
    for line in sys.stdin:
        cmd = json.loads(line)
        c = cmd["cmd"]
        if c == "spawn":
            t = time.perf_counter()
            skm, skc = start(cmd.get("transport", "tcp"))
            out = {"ms": (time.perf_counter() - t) * 1000}
            stop(skm, skc)
        elif c == "open":
            km, kc = start(cmd.get("transport", "tcp"))
            out = {"ok": True}
        elif c == "rt":
            out = {"ms": [round_trip(kc) for _ in range(cmd["n"])]}
        elif c == "close":
            stop(km, kc)
            km = kc = None
            out = {"ok": True}
        else:
            out = {"error": "unknown command " + c}
        print(json.dumps(out), flush=True)
    if km is not None:
        stop(km, kc)


if __name__ == "__main__":
    main()
