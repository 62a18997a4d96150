"""Streaming over the session websocket (GET /api/sessions/{id}/ws, JSON text frames).

Uses websocket-client (Debian: python3-websocket), which handles framing, masking, ping/pong and
close; it is imported only here, so everything else works without it."""

from __future__ import annotations

import json
import uuid
from typing import Any, Dict, Iterator, Optional

from .errors import CarryoverError, ConnectionFailed, error_for
from .types import Event, Execution, ExecutionError, Result


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


def _recv(ws) -> Dict[str, Any]:
    websocket = _websocket()
    while True:
        try:
            msg = ws.recv()
        except websocket.WebSocketTimeoutException as e:
            raise ConnectionFailed("websocket: no frame within the timeout") from e
        except (OSError, websocket.WebSocketException) as e:
            raise ConnectionFailed("websocket closed: %s" % e) from e
        if not msg:
            raise ConnectionFailed("websocket closed by the server")
        if isinstance(msg, bytes):
            msg = msg.decode()
        return json.loads(msg)


def stream_run(client, session_id: str, code: str, *, on_stdout=None, on_stderr=None,
               on_result=None, on_error=None, on_input=None, on_output=None,
               timeout: Optional[float] = None) -> Execution:
    """See Carryover.stream_run."""
    ws = connect(client, session_id, timeout=client._run_timeout(timeout))
    try:
        return _run(ws, code, on_stdout, on_stderr, on_result, on_error, on_input, on_output,
                    timeout)
    except BaseException as e:
        # A callback raised, Ctrl-C, or the connection broke: do not leave the code running.
        if not isinstance(e, CarryoverError) or isinstance(e, ConnectionFailed):
            try:
                ws.send(json.dumps({"type": "interrupt"}))
            except Exception:
                pass
        raise
    finally:
        try:
            ws.close()
        except Exception:
            pass


def _run(ws, code, on_stdout, on_stderr, on_result, on_error, on_input, on_output,
         timeout) -> Execution:
    rid = "py-" + uuid.uuid4().hex[:12]
    frame: Dict[str, Any] = {"type": "run", "id": rid, "code": code}
    if timeout is not None:
        frame["timeout_seconds"] = timeout
    ws.send(json.dumps(frame))
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
            value = on_input(f.get("prompt", ""), bool(f.get("password"))) if on_input else ""
            ws.send(json.dumps({"type": "input_reply", "id": rid,
                                "value": "" if value is None else str(value)}))
        elif t == "result":
            result = Execution.from_dict(f.get("result") or {})
        elif t == "error":
            err = f.get("error") or {}
            raise error_for(err.get("code"), err.get("message", ""), 0, err.get("details"),
                            result)
        elif t == "status" and f.get("execution_state") == "idle" and result is not None:
            return result


def stream_events(client, session_id: str, after_sequence: int = 0) -> Iterator[Event]:
    """See Carryover.stream_events. Blocks between events (no read timeout)."""
    ws = connect(client, session_id)
    try:
        ws.settimeout(None)
        ws.send(json.dumps({"type": "subscribe_events", "after_sequence": after_sequence}))
        while True:
            f = _recv(ws)
            if f.get("type") == "event" and f.get("event"):
                yield Event.from_dict(f["event"])
            elif f.get("type") == "error" and not f.get("id"):
                err = f.get("error") or {}
                raise error_for(err.get("code"), err.get("message", ""), 0, err.get("details"))
    finally:
        try:
            ws.close()
        except Exception:
            pass
