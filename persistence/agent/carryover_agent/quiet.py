"""Whether anything of the session can run in the kernel without a message from the server: a
thread it started, an asyncio task or callback, an interval timer. Reported with every snapshot
("quiet"), so the server may skip a checkpoint when no message reached the kernel since a quiet
one (a draining node's handover): nothing could have changed the namespace in between. Anything
that cannot be told for sure answers not quiet (the checkpoint is then taken as before).

The kernel's own threads and tasks (ipykernel's IOPub, Heartbeat, Control, its dispatch queue)
are the baseline taken when the agent is installed, before any session code ran."""

import asyncio
import functools
import signal
import threading

# Modules whose loop callbacks are the kernel's own machinery, not the session's.
_OWN = ("ipykernel", "tornado", "zmq", "asyncio", "jupyter_client", "comm", "traitlets")


class Baseline:
    def __init__(self):
        self.threads = set()
        self.tasks = set()
        self.take()

    def take(self):
        """Records the threads and tasks alive now as the kernel's own (no session code ran yet)."""
        self.threads = {t.ident for t in threading.enumerate()}
        self.tasks = {id(t) for t in _tasks()}


def _loop():
    """The kernel's event loop (running: the snapshot runs inside an execute), else the thread's
    current one, never a new one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    return getattr(local, "_loop", None)


def _tasks():
    loop = _loop()
    if loop is None:
        return set()
    return asyncio.all_tasks(loop)


def _own_callback(h, allowed_tasks):
    """Whether loop handle h runs the kernel's own code. Tornado runs every callback given to its
    IOLoop through IOLoop._run_callback: the callback it carries is what counts."""
    cb, args = getattr(h, "_callback", None), getattr(h, "_args", ()) or ()
    if getattr(cb, "__qualname__", "") == "IOLoop._run_callback" and args:
        cb = args[0]
    while isinstance(cb, functools.partial):
        cb = cb.func
    owner = getattr(cb, "__self__", None)
    if isinstance(owner, asyncio.Task):
        return id(owner) in allowed_tasks
    mod = getattr(cb, "__module__", None) or getattr(type(owner), "__module__", "") or ""
    return mod.split(".")[0] in _OWN


def quiet(base):
    """True when only the kernel's own threads, tasks and loop callbacks exist and no interval
    timer is armed; False when anything else does, or when it cannot be told."""
    try:
        me = threading.current_thread().ident
        for t in threading.enumerate():
            if t.is_alive() and t.ident not in base.threads and t.ident != me:
                return False
        for which in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
            if signal.getitimer(which) != (0.0, 0.0):
                return False
        loop = _loop()
        if loop is None:
            return True
        cur = asyncio.current_task(loop) if loop.is_running() else None
        allowed = set(base.tasks)
        if cur is not None:
            allowed.add(id(cur))
        for t in asyncio.all_tasks(loop):
            if id(t) not in allowed:
                return False
        scheduled = getattr(loop, "_scheduled", None)
        ready = getattr(loop, "_ready", None)
        if scheduled is None or ready is None:
            return False
        for h in list(scheduled) + list(ready):
            if h.cancelled():
                continue
            if not _own_callback(h, allowed):
                return False
        return True
    except Exception:
        return False
