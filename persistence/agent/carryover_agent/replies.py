"""Costs of every execute_request that buy nothing for the server, taken off at the agent's install.

* The agent's answers (JSONText) come back as user expressions, and IPython formats each one with
  every display formatter (text/plain, HTML, Markdown, SVG, PNG, JPEG, LaTeX, JSON, JavaScript, PDF,
  each through a decorator that binds its arguments with inspect): ~0.4 ms a turn for a text/plain
  that is the string itself (JSONText's repr). A JSONText is formatted as exactly that; any other
  value (a front door client's own user expressions) goes through the formatters as before.
* ipykernel sleeps 0.5 ms (Kernel._execute_sleep) before each execute_reply, "so that output makes it
  to the clients" first. The server waits for the request's idle status on IOPub, which the kernel
  publishes after the request's every output, and ipykernel's flush before the reply already waits
  for the IOPub thread to send what was written: the sleep only delays every answer. A value set
  explicitly after the install (a test holding that moment open) stands.
* ipykernel flushes stdout and stderr twice a turn (after the result, before the reply), and each
  flush hands the IOPub thread a flush and an event and waits for it: four thread round trips a
  turn (~0.3 ms each here) when the cell printed nothing. A flush returns at once when nothing is
  left to send: the stream's buffer is empty, no flush of it is scheduled, pending or running on
  the IOPub thread, and it echoes nowhere. Whatever was written before the flush is then already
  sent, as the full flush would have made sure."""

import sys
import threading

from .common import JSONText


def install(shell):
    """Installs the three on shell (an IPython shell), its kernel and its output streams when it has
    them. Idempotent."""
    fmt = getattr(shell, "_format_user_obj", None)
    if fmt is not None and not getattr(fmt, "_carryover", False):
        shell._format_user_obj = _plain_json(fmt)
    kernel = getattr(shell, "kernel", None)
    if kernel is not None and getattr(kernel, "_execute_sleep", None) == _IPYKERNEL_SLEEP:
        kernel._execute_sleep = 0
    quick_streams()


def quick_streams():
    """Gives sys.stdout and sys.stderr, when they are ipykernel's streams, the flush described
    above. Idempotent."""
    for stream in (sys.stdout, sys.stderr):
        _quick_flush(stream)


_IPYKERNEL_SLEEP = 0.0005  # ipykernel's default: only that is turned off


def _plain_json(fmt):
    def format_user_obj(obj):
        if type(obj) is JSONText:
            return {"status": "ok", "data": {"text/plain": str(obj)}, "metadata": {}}
        return fmt(obj)

    format_user_obj._carryover = True
    return format_user_obj


def _quick_flush(stream):
    """Gives an ipykernel OutStream the flush described above (once; other streams are left)."""
    if type(stream).__module__ != "ipykernel.iostream" or getattr(stream.flush, "_carryover", False):
        return
    needed = ("_flush", "_flush_pending", "_subprocess_flush_pending", "_buffer_lock", "_buffer", "echo")
    if not all(hasattr(stream, a) for a in needed):
        return  # another ipykernel than the one this was written against: its flush as it is
    full, send = stream.flush, stream._flush
    running = [0]  # the stream's sends under way on the IOPub thread
    lock = threading.Lock()

    def tracked_send():
        with lock:
            running[0] += 1
        try:
            send()
        finally:
            with lock:
                running[0] -= 1

    def flush():
        if stream.echo is None and not stream._flush_pending and not stream._subprocess_flush_pending:
            with lock:
                idle = running[0] == 0
            if idle:
                with stream._buffer_lock:
                    if stream._buffer.tell() == 0:
                        return
        full()

    stream._flush = tracked_send
    flush._carryover = True
    stream.flush = flush
