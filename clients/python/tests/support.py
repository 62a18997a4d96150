"""A real carryover server for the tests: started once per test process, stopped at exit.

$CARRYOVER_TEST_BIN names a prebuilt binary (the Go test passes its own); else ./cmd/carryover
is built with `go build` from the module root into a temporary directory."""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from carryover import Carryover  # noqa: E402

TOKEN = "t"
_server = None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _binary(tmp):
    bin_ = os.environ.get("CARRYOVER_TEST_BIN")
    if bin_:
        return bin_
    root = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
    bin_ = os.path.join(tmp, "carryover")
    subprocess.run(["go", "build", "-o", bin_, "./cmd/carryover"], cwd=root, check=True)
    return bin_


def server_url():
    """The base URL of the test server, starting it on first use."""
    global _server
    if _server:
        return _server[0]
    tmp = tempfile.mkdtemp(prefix="carryover-pysdk-test-")
    bin_ = _binary(tmp)
    addr = "127.0.0.1:%d" % _free_port()
    log = open(os.path.join(tmp, "server.log"), "wb")
    env = dict(os.environ, CARRYOVER_SANDBOX_ENABLED="false")
    proc = subprocess.Popen([bin_, "serve", "--data_dir", os.path.join(tmp, "data"),
                             "--server.addr", addr, "--auth.token", TOKEN, "--pool.size", "1"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)

    def stop():
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)

    atexit.register(stop)
    url = "http://" + addr
    deadline = time.time() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError("server exited at start:\n" + open(log.name).read())
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.time() > deadline:
            raise RuntimeError("server not healthy after 60s:\n" + open(log.name).read())
        time.sleep(0.05)
    _server = (url, stop)
    return url


def client():
    return Carryover(server_url(), auth_token=TOKEN)
