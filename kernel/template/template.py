"""carryover kernel template: a warm Python process that forks one kernel per request.

Started by the Go side (kernel/template) as ``python <this file> <config json>``. It imports
ipykernel, the snapshot agent's dependencies and ``persistence.pre_import`` once, freezes the garbage
collector's view of those objects (gc.freeze: collections in a child never touch them, so their pages
stay shared copy-on-write), then waits on stdin for requests, one JSON object a line:

    {"id": 1, "args": ["-f", "/run/k/connection.json"], "env": {...}, "dir": "/ws", "log": "/run/k/log"}

and answers on stdout, one JSON object a line:

    {"ready": true, "pid": P}            once, when warm
    {"id": 1, "pid": C}                  the child that is the kernel ({"id": 1, "error": "..."})
    {"exit": C, "status": S}             a child was reaped (S: the raw wait status)

The template runs no user code and starts no thread (a fork copies only the forking thread; a lock
held by another thread would stay locked in the child forever). It checks both before every fork.

A child is a fresh kernel in everything that is its own: it leads a new session and process group,
its stdin is /dev/null and its output goes to the kernel log, its environment and cwd are the
request's, the kernel app (its ZMQ context and sockets, its threads, its connection file, IPython's
shell) is made after the fork, and so is the snapshot agent (installed by the server afterwards).
Python's ``random`` reseeds itself at fork; numpy's legacy global RandomState does not, so it is
reseeded from the OS's entropy as a fresh interpreter's would be. PYTHONHASHSEED (str hashing) is
fixed at interpreter start and cannot change: children of one template share it.

A child dies with the server (not with the template, whose kill -9 must not take sessions with it):
a thread waits on a pidfd of the server's process.
"""

import gc
import importlib
import json
import os
import select
import signal
import sys
import threading
import traceback

# Modules the snapshot agent imports when it is installed into a kernel: loaded here once.
AGENT_DEPS = ["dill", "xxhash", "zstandard", "pickle", "ast", "hashlib", "base64", "json"]


def _say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _warm(modules):
    """Imports what every kernel needs, then what the config pre-imports (missing ones are skipped)."""
    # sys.path[0] is this script's dir; a kernel started by `python -m ipykernel_launcher` has the
    # cwd there and deletes it (never import from the cwd): the children match the latter.
    if sys.path and sys.path[0] in ("", os.path.dirname(os.path.abspath(__file__))):
        del sys.path[0]
    # MPLBACKEND (read by pyplot at import) is in our env as in every kernel's (kernel/template/env.go).
    import ipykernel.kernelapp  # noqa: F401  (the kernel app, IPython, zmq, tornado, jupyter_client)
    import ipykernel.ipkernel  # noqa: F401

    for name in AGENT_DEPS + list(modules):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (a module not installed is ignored, as pre_import says)
            pass
    gc.collect()
    gc.freeze()


def _server_watch(server_pid):
    """Exits the child when the server's process ends (a kill -9 of the server included)."""
    try:
        fd = os.pidfd_open(server_pid)
    except OSError:
        os._exit(1)  # the server is already gone

    def wait():
        select.select([fd], [], [])
        os._exit(1)

    threading.Thread(target=wait, name="carryover-server-watch", daemon=True).start()


def _retitle(argv):
    """Makes /proc/PID/cmdline the kernel's argv, as a cold kernel's, so whoever looks for kernels
    by it (ps, tests) finds this one: written over the template's own argv area (the Go side pads it
    long enough; a longer argv is cut), the rest zeroed. Best effort: the kernel works without it."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        data = b"\0".join(os.fsencode(a) for a in argv)[: end - start - 1]
        fd = os.open("/proc/self/mem", os.O_RDWR)
        try:
            os.pwrite(fd, data.ljust(end - start, b"\0"), start)
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        pass


def _reseed():
    """Gives the child RNG state of its own, as a fresh interpreter has."""
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()  # no argument: from the OS's entropy


def _child(req, cfg, keep_out):
    """Becomes the kernel the request asked for; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in keep_out:
            os.close(fd)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.environ.clear()
        os.environ.update(req["env"])
        if req.get("dir"):
            os.chdir(req["dir"])
        _retitle([sys.executable, "-m", "ipykernel_launcher"] + list(req["args"]))
        _reseed()
        _server_watch(cfg["server_pid"])
        from ipykernel import kernelapp

        sys.argv = ["ipykernel_launcher"] + list(req["args"])
        kernelapp.launch_new_instance(argv=list(req["args"]))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _fork(req, cfg, keep_out):
    """Forks a child for req and answers its pid (or why there is none)."""
    if threading.active_count() != 1:
        return {"id": req.get("id"), "error": "the template has a thread; it must not fork"}
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(req, cfg, keep_out)
    return {"id": req.get("id"), "pid": pid}


def _reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _say({"exit": pid, "status": status})


def main():
    cfg = json.loads(sys.argv[1])
    _warm(cfg.get("pre_import") or [])
    rd, wr = os.pipe()
    os.set_blocking(rd, False)
    os.set_blocking(wr, False)
    signal.set_wakeup_fd(wr)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stdin = sys.stdin.buffer.raw
    _say({"ready": True, "pid": os.getpid()})
    buf = b""
    while True:
        ready, _, _ = select.select([stdin, rd], [], [])
        if rd in ready:
            try:
                while os.read(rd, 512):
                    pass
            except BlockingIOError:
                pass
            _reap()
        if stdin not in ready:
            continue
        data = os.read(stdin.fileno(), 65536)
        if not data:
            return  # the server closed us: the children are the server's kernels and stay
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                _say(_fork(json.loads(line), cfg, (rd, wr)))


if __name__ == "__main__":
    main()
