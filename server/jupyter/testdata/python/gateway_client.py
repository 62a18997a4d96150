"""Drives Debian's jupyter_server 1.23 started with --gateway-url pointing at carryover's /jupyter
(server/jupyter_gateway_test.go): its kernelspecs are carryover's, a kernel started through it runs
code over jupyter_server's own websocket, and after the test kills carryover with SIGKILL and starts
it again (it prints KILL and waits for a line on stdin), the kernel still has its variables.
Usage: gateway_client.py JUPYTER_SERVER_URL TOKEN CARRYOVER_URL CARRYOVER_TOKEN"""
import json
import sys
import time
import urllib.request
import uuid

import websocket

JS, TOKEN, CO, CO_TOKEN = sys.argv[1:5]


def api(base, token, method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "token " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as res:
        raw = res.read()
        return json.loads(raw) if raw else None


def message(msg_type, content):
    return {"header": {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "username": "t", "session": uuid.uuid4().hex,
                       "date": "2026-01-01T00:00:00.000000Z", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "content": content}


def replies(ws, mid, deadline):
    """Yields the messages whose parent is mid until deadline (an absolute time.time()); jupyter_server's
    keepalive pings would otherwise reset websocket-client's per-read timeout forever."""
    while True:
        left = deadline - time.time()
        if left <= 0:
            raise TimeoutError("no reply to %s in time" % mid)
        ws.settimeout(left)
        try:
            m = json.loads(ws.recv())
        except websocket.WebSocketTimeoutException:
            raise TimeoutError("no reply to %s in time" % mid)
        if m.get("parent_header", {}).get("msg_id") == mid:
            yield m


def handshake(ws):
    """Sends kernel_info_request until one is answered, as JupyterLab does on connect. jupyter_server 1.23's
    GatewayWebSocketClient drops a message that arrives before its own connection to the gateway is
    made (on_message waits on a placeholder future its _connect then replaces), so the first request
    may vanish inside jupyter_server; carryover never sees it."""
    deadline = time.time() + 60
    while True:
        req = message("kernel_info_request", {})
        ws.send(json.dumps(req))
        try:
            for m in replies(ws, req["header"]["msg_id"], min(deadline, time.time() + 3)):
                if m["msg_type"] == "kernel_info_reply":
                    return
        except TimeoutError:
            if time.time() > deadline:
                raise
            print("kernel_info_request unanswered; sending another", flush=True)


def run(kid, code):
    """Runs code over jupyter_server's channels websocket; returns (reply content, stdout)."""
    ws = websocket.create_connection(JS.replace("http", "ws") + "/api/kernels/%s/channels?token=%s" % (kid, TOKEN), timeout=120)
    try:
        handshake(ws)
        req = message("execute_request", {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                                          "allow_stdin": False, "stop_on_error": True})
        ws.send(json.dumps(req))
        out, reply, idle = "", None, False
        for m in replies(ws, req["header"]["msg_id"], time.time() + 120):
            if m["msg_type"] == "stream":
                out += m["content"]["text"]
            elif m["msg_type"] == "execute_reply":
                reply = m["content"]
            elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                idle = True
            if reply is not None and idle:
                return reply, out
    finally:
        ws.close()


def check(cond, what):
    if not cond:
        raise SystemExit("check failed: " + what)


specs = api(JS, TOKEN, "GET", "/api/kernelspecs")
check(specs["kernelspecs"]["python3"]["spec"]["display_name"] == "Python 3 (carryover)", "kernelspecs through the gateway: %r" % specs)
kernel = api(JS, TOKEN, "POST", "/api/kernels", {"name": "python3"})
kid = kernel["id"]
check(any(k["id"] == kid for k in api(CO, CO_TOKEN, "GET", "/jupyter/api/kernels")), "the kernel is carryover's")
reply, out = run(kid, "x = 6 * 7\nprint(x)")
check(reply["status"] == "ok" and out == "42\n", "first run: %r %r" % (reply, out))
print("KERNEL " + kid, flush=True)
print("KILL", flush=True)
sys.stdin.readline()

# jupyter_server still lists the kernel (it asks carryover), and it runs with x restored.
check(any(k["id"] == kid for k in api(JS, TOKEN, "GET", "/api/kernels")), "listed after carryover's restart")
deadline = time.time() + 60
while True:
    try:
        reply, out = run(kid, "print(x + 1)")
        break
    except Exception as e:  # jupyter_server may need a moment to reach the new carryover
        if time.time() > deadline:
            raise
        print("retrying after", repr(e), flush=True)
        time.sleep(1)
check(reply["status"] == "ok" and out == "43\n", "after carryover's kill -9: %r %r" % (reply, out))
print("OK", flush=True)
