"""Streaming over the session websocket (GET /api/sessions/{id}/ws, JSON text frames).

Uses websocket-client (Debian: python3-websocket), which handles framing, masking, ping/pong and
close; it is imported only here, so everything else works without it."""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Any, Dict, Iterator, Optional

from .errors import CarryoverError, ConnectionFailed, error_for
from .types import Event, Execution, ExecutionError, Result

# INPUT_EOF answers input() with the end of input: the kernel raises EOFError (a terminal's Ctrl-D).
INPUT_EOF = "\x04"


def _websocket():
    try:
        import websocket  # websocket-client
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError("carryover streaming needs websocket-client "
                          "(Debian: apt-get install python3-websocket; pip: websocket-client)") from e
    return websocket


def connect(client, session_id: str, timeout: Optional[float] = None):
    """Opens the session's websocket; a refused upgrade raises the CarryoverError of its status."""
    websocket = _websocket()
    base = client.base_url
    if base.startswith("https://"):
        url = "wss://" + base[len("https://"):]
    elif base.startswith("http://"):
        url = "ws://" + base[len("http://"):]
    else:
        url = base
    url += client._session_path(session_id, "ws")
    header = ["Authorization: Bearer " + client.auth_token] if client.auth_token else []
    try:
        return websocket.create_connection(url, header=header, timeout=timeout or client.timeout)
    except websocket.WebSocketBadStatusException as e:
        status = getattr(e, "status_code", 0) or 0
        raise error_for(None, "websocket upgrade refused: %s" % e, status) from None
    except (OSError, websocket.WebSocketException) as e:
        raise ConnectionFailed("websocket %s: %s" % (url, e)) from e


class Dropped(ConnectionFailed):
    """The websocket closed under a call (the server restarted, 1001/1006/1012): reconnected."""


def _recv(ws) -> Dict[str, Any]:
    websocket = _websocket()
    while True:
        try:
            msg = ws.recv()
        except websocket.WebSocketTimeoutException as e:
            raise ConnectionFailed("websocket: no frame within the timeout") from e
        except (OSError, websocket.WebSocketException) as e:
            raise Dropped("websocket closed: %s" % e) from e
        if not msg:
            raise Dropped("websocket closed by the server")
        if isinstance(msg, bytes):
            msg = msg.decode()
        return json.loads(msg)


class _Reconnect:
    """The retry clock of one streaming call: a dropped websocket, or a refused one while the
    server restarts, is opened again with backoff for up to client.retry_seconds."""

    def __init__(self, client):
        self.client = client
        self.deadline = time.monotonic() + client.retry_seconds
        self.attempt = 0

    def connect(self, session_id: str, timeout: Optional[float]):
        while True:
            try:
                return connect(self.client, session_id, timeout=timeout)
            except CarryoverError as e:
                unserved = isinstance(e, ConnectionFailed) or e.status in (421, 503) or (
                    e.status == 429 and e.code in ("capacity", "rate_limited"))
                if not (unserved and self.wait()):
                    raise

    def wait(self) -> bool:
        self.attempt += 1
        backoff = min(3.0, 0.1 * 2 ** (self.attempt - 1))
        pause = backoff / 2 + random.random() * backoff / 2
        if time.monotonic() + pause > self.deadline:
            return False
        time.sleep(pause)
        return True


def stream_run(client, session_id: str, code: str, *, on_stdout=None, on_stderr=None,
               on_result=None, on_error=None, on_input=None, on_output=None,
               timeout: Optional[float] = None, idempotency_key: Optional[str] = None) -> Execution:
    """See Carryover.stream_run. A websocket that drops mid-run is reconnected and the run frame
    sent again with the same id and idempotency key: the server answers with the first attempt's
    result (outputs printed while the connection was down reach the result, not the callbacks)."""
    rc = _Reconnect(client)
    frame: Dict[str, Any] = {"type": "run", "id": "py-" + uuid.uuid4().hex[:12], "code": code,
                             "idempotency_key": idempotency_key or "py-" + uuid.uuid4().hex}
    if timeout is not None:
        frame["timeout_seconds"] = timeout
    while True:
        ws = rc.connect(session_id, client._run_timeout(timeout))
        try:
            return _stream_run_once(ws, frame, on_stdout, on_stderr, on_result, on_error, on_input, on_output)
        except Dropped:
            if not rc.wait():
                raise
        finally:
            try:
                ws.close()
            except Exception:
                pass


def _stream_run_once(ws, frame, on_stdout, on_stderr, on_result, on_error, on_input,
                     on_output) -> Execution:
    try:
        return _run_frames(ws, frame, on_stdout, on_stderr, on_result, on_error, on_input,
                           on_output)
    except Dropped:
        raise
    except BaseException as e:
        # A callback raised, Ctrl-C, or no frame within the timeout: do not leave the code running.
        if not isinstance(e, CarryoverError) or isinstance(e, ConnectionFailed):
            try:
                ws.send(json.dumps({"type": "interrupt"}))
            except Exception:
                pass
        raise


def _run_frames(ws, frame, on_stdout, on_stderr, on_result, on_error, on_input,
                on_output) -> Execution:
    rid = frame["id"]
    try:
        ws.send(json.dumps(frame))
    except Exception as e:
        raise Dropped("websocket closed: %s" % e) from e
    result: Optional[Execution] = None
    while True:
        f = _recv(ws)
        if f.get("id") != rid:
            continue  # other runs' frames, events, notices
        t = f.get("type")
        if t == "output":
            out = f.get("output") or {}
            if on_output:
                on_output(out)
            ot = out.get("type")
            if ot == "stream":
                cb = on_stderr if out.get("name") == "stderr" else on_stdout
                if cb:
                    cb(out.get("text", ""))
            elif ot in ("execute_result", "display_data") and on_result:
                on_result(Result.from_output(out))
            elif ot == "error" and on_error:
                on_error(ExecutionError.from_dict(out))
        elif t == "input_request":
            # Without on_input, or when it answers None, input() raises EOFError (the end of
            # input, INPUT_EOF): an empty line each time would never end a loop reading lines.
            value = on_input(f.get("prompt", ""), bool(f.get("password"))) if on_input else None
            ws.send(json.dumps({"type": "input_reply", "id": rid,
                                "value": INPUT_EOF if value is None else str(value)}))
        elif t == "result":
            result = Execution.from_dict(f.get("result") or {})
        elif t == "error":
            err = f.get("error") or {}
            raise error_for(err.get("code"), err.get("message", ""), 0, err.get("details"),
                            result)
        elif t == "status" and f.get("execution_state") == "idle" and result is not None:
            return result


def stream_events(client, session_id: str, after_sequence: int = 0) -> Iterator[Event]:
    """See Carryover.stream_events. Blocks between events (no read timeout). A websocket that
    drops (a server restart) is reconnected with after_sequence = the last event seen, so no
    event is lost or repeated."""
    rc = _Reconnect(client)
    while True:
        ws = rc.connect(session_id, None)
        try:
            ws.settimeout(None)
            ws.send(json.dumps({"type": "subscribe_events", "after_sequence": after_sequence}))
            while True:
                f = _recv(ws)
                if f.get("type") == "event" and f.get("event"):
                    ev = Event.from_dict(f["event"])
                    after_sequence = max(after_sequence, ev.sequence_number or 0)
                    rc.attempt = 0
                    yield ev
                elif f.get("type") == "error" and not f.get("id"):
                    err = f.get("error") or {}
                    if err.get("code") == "not_owner" and rc.wait():
                        break  # the session moved to another node: reconnect
                    raise error_for(err.get("code"), err.get("message", ""), 0, err.get("details"))
        except Dropped:
            if not rc.wait():
                raise
        except OSError as e:
            if not rc.wait():
                raise Dropped("websocket closed: %s" % e) from e
        finally:
            try:
                ws.close()
            except Exception:
                pass
