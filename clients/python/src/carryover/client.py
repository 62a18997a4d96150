"""The HTTP client: StateSet agent-session calls, the ERA run flow, files, events, tools and
checkpoints. Standard library only (urllib); streaming is in stream.py."""

from __future__ import annotations

import base64
import json
import os
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .errors import CarryoverError, ConnectionFailed, NotFound, error_for
from .types import (Checkpoint, Event, ExecResult, Execution, FileInfo, RestoreResult, Session,
                    Tool, Usage)

DEFAULT_URL = "http://127.0.0.1:8080"

_SESSION_FIELDS = ("session_id", "name", "language", "data", "budget", "sandbox", "rotation",
                   "client_id")


def _quote(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _file_url_path(path: str) -> str:
    """The URL tail of a workspace file: "notes.md" and "/workspace/notes.md" both give
    "notes.md"; any other absolute path is refused here rather than cleaned into another file."""
    if path == "/workspace" or path.startswith("/workspace/"):
        path = path[len("/workspace"):].lstrip("/")
    elif path.startswith("/"):
        raise ValueError("file path %r is outside /workspace" % path)
    if not path:
        raise ValueError("empty file path")
    return "/".join(_quote(p) for p in path.split("/"))


# Answers that say the request was not served: 421 (another node serves the session), 503, and a 429
# that says when to come back (Retry-After: capacity, rate_limited). A quota_exceeded 429 has none:
# waiting would not free the tenant's quota, so it is raised at once.
_UNSERVED = (421, 503, 429)


def _unserved(status: int, retry_after: Optional[str]) -> bool:
    return status in _UNSERVED and (status != 429 or bool(retry_after))


def _retry_after(value: Optional[str]) -> float:
    """Seconds a Retry-After header asks for (0 when absent or unreadable)."""
    if not value:
        return 0.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime
        import datetime
        when = parsedate_to_datetime(value)
        return max(0.0, (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return 0.0


def new_idempotency_key() -> str:
    """A fresh idempotency key (what run and exec send when given none)."""
    return "py-" + uuid.uuid4().hex


def _key_header(key: Optional[str]) -> Dict[str, str]:
    return {"Idempotency-Key": key or new_idempotency_key()}


class Carryover:
    """A client of a carryover server.

    ``base_url`` is the server's address (``http://127.0.0.1:8080``; a trailing ``/api`` is
    accepted), ``auth_token`` its token; they default to $CARRYOVER_URL and $CARRYOVER_TOKEN.
    ``timeout`` is the socket timeout of each HTTP call, in seconds (runs with a longer
    ``timeout`` argument get that plus a margin).

    Calls ride out a server's restart or a rolling upgrade: a connection that fails, and the
    answers 421 (the session's node changed), 503 and 429 (after their Retry-After) are retried
    with backoff for up to ``retry_seconds`` (0: never). A call that may have reached the server
    is retried only when it may be repeated: GET, PUT, DELETE, or a run or exec, which carry an
    idempotency key (one per call, or the ``idempotency_key`` you pass) so the server answers a
    retry with the first attempt's answer and never runs the code twice.

    Method names and arguments follow StateSet's Python SDK (``create_agent_session``,
    ``execute_in_agent_session``, ...), so a StateSet agent ports by changing ``base_url``.
    """

    def __init__(self, base_url: Optional[str] = None, auth_token: Optional[str] = None, *,
                 timeout: float = 330.0, api_key: Optional[str] = None,
                 retry_seconds: float = 60.0):
        url = (base_url or os.environ.get("CARRYOVER_URL") or DEFAULT_URL).rstrip("/")
        if url.endswith("/api"):
            url = url[:-4]
        self.base_url = url
        self.auth_token = auth_token or api_key or os.environ.get("CARRYOVER_TOKEN") or ""
        self.timeout = timeout
        self.retry_seconds = retry_seconds

    # ---- plumbing -------------------------------------------------------------------------

    def _headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        h = {"Accept": "application/json"}
        if self.auth_token:
            h["Authorization"] = "Bearer " + self.auth_token
        h.update(extra or {})
        return h

    def request(self, method: str, path: str, body: Any = None, *, raw: Optional[bytes] = None,
                query: Optional[Dict[str, Any]] = None, timeout: Optional[float] = None,
                partial: Optional[Callable[[Dict[str, Any]], Any]] = None,
                binary: bool = False, headers: Optional[Dict[str, str]] = None) -> Any:
        """One API call: ``path`` under the server root (``/api/sessions``). Returns the decoded
        JSON answer, the raw bytes for a non-JSON answer, or None for 204. An error answer raises
        the CarryoverError subclass of its code; ``partial`` turns the partial ``result`` that
        timeouts and kernel deaths carry into the exception's ``.result``."""
        url = self.base_url + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        headers = dict(headers or {})
        data = None
        if raw is not None:
            data = raw
            headers["Content-Type"] = "application/octet-stream"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif method in ("POST", "PUT", "PATCH"):
            data = b""
        repeatable = method in ("GET", "HEAD", "PUT", "DELETE") or "Idempotency-Key" in headers
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        while True:
            attempt += 1
            req = urllib.request.Request(url, data=data, method=method, headers=self._headers(headers))
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                    payload = resp.read()
                    ctype = resp.headers.get("Content-Type", "")
                    status = resp.status
                break
            except urllib.error.HTTPError as e:
                body = e.read()
                ra = e.headers.get("Retry-After")
                wait = _retry_after(ra) if _unserved(e.code, ra) else None
                # A 421 says the session just moved (a node drained): its new node serves the first
                # retry, sent at once.
                at_once = e.code == 421 and attempt == 1 and not ra
                if wait is None or not self._may_wait(deadline, attempt, wait, at_once):
                    raise self._decode_error(e.code, body, partial) from None
            except (urllib.error.URLError, socket.timeout, ConnectionError) as e:
                reason = getattr(e, "reason", e)
                if "Idempotency-Key" in headers and isinstance(reason, socket.timeout):
                    # A keyed call (run, exec, execute) outlasting the socket's timeout is asked
                    # again at once with its key: the server holds it until the attempt in flight
                    # ends and answers with its result. Not a retry (the code runs once, the retry
                    # clock is not spent), so a run may last what the server allows.
                    continue
                unsent = isinstance(reason, (ConnectionRefusedError, socket.gaierror))
                if not ((unsent or repeatable) and self._may_wait(deadline, attempt, 0)):
                    raise ConnectionFailed("%s %s: %s" % (method, url, reason)) from e
        if status == 204 or not payload:
            return b"" if binary else None
        if "json" in ctype and not binary:
            return json.loads(payload)
        return payload

    def _may_wait(self, deadline: float, attempt: int, floor: float, at_once: bool = False) -> bool:
        """Sleeps before another attempt (the backoff, or ``floor`` from a Retry-After; none when
        ``at_once``) and says whether to make it: False when the retry time is spent."""
        if at_once:
            return time.monotonic() < deadline
        backoff = min(3.0, 0.1 * 2 ** (attempt - 1))
        wait = max(floor, backoff / 2 + random.random() * backoff / 2)
        if time.monotonic() + wait > deadline:
            return False
        time.sleep(wait)
        return True

    @staticmethod
    def _decode_error(status: int, payload: bytes, partial=None) -> CarryoverError:
        try:
            doc = json.loads(payload)
            err = doc["error"]
            result = doc.get("result")
            if result is not None and partial is not None:
                result = partial(result)
            return error_for(err.get("code"), err.get("message", ""), status,
                             err.get("details"), result)
        except (ValueError, KeyError, TypeError, AttributeError):
            text = payload.decode("utf-8", "replace").strip()[:512]
            return error_for(None, text or "HTTP %d" % status, status)

    def _session_path(self, session_id: str, *parts: str) -> str:
        return "/api/sessions/" + "/".join([_quote(session_id)] + [_quote(p) for p in parts])

    def _session(self, method: str, path: str, body: Any = None) -> Session:
        return Session.from_dict(self.request(method, path, body)["session"])

    def _run_timeout(self, seconds: Optional[float]) -> float:
        return max(self.timeout, (seconds or 0) + 30)

    def health(self) -> bool:
        """True when GET /healthz answers ok."""
        return (self.request("GET", "/healthz") or {}).get("status") == "ok"

    # ---- StateSet agent sessions -----------------------------------------------------------

    def create_agent_session(self, name: Optional[str] = None, budget: Optional[Dict] = None,
                             sandbox: Optional[Dict] = None, rotation: Optional[Dict] = None,
                             client_id: Optional[str] = None, *, session_id: Optional[str] = None,
                             data: Optional[Dict] = None, language: Optional[str] = None,
                             start: bool = False, **extra: Any) -> Session:
        """POST /api/sessions. Every argument is optional; ``extra`` keys are sent as given. A
        dict as first argument is taken as the whole request (the Node SDK's shape)."""
        if isinstance(name, dict):
            extra = {**name, **extra}
            name = extra.pop("name", None)
        body = {k: v for k, v in dict(name=name, budget=budget, sandbox=sandbox, rotation=rotation,
                                      client_id=client_id, session_id=session_id, data=data,
                                      language=language).items() if v is not None}
        if start:
            body["start"] = True
        body.update(extra)
        return self._session("POST", "/api/sessions", body)

    def start_agent_session(self, session_id: str) -> Session:
        return self._session("POST", self._session_path(session_id, "start"))

    def pause_agent_session(self, session_id: str) -> Session:
        return self._session("POST", self._session_path(session_id, "pause"))

    def resume_agent_session(self, session_id: str) -> Session:
        return self._session("POST", self._session_path(session_id, "resume"))

    def stop_agent_session(self, session_id: str, reason: Optional[str] = None) -> Session:
        """Stops gracefully (state completed, final checkpoint taken)."""
        body = {"reason": reason} if reason else None
        return self._session("POST", self._session_path(session_id, "stop"), body)

    def cancel_agent_session(self, session_id: str, reason: Optional[str] = None) -> Session:
        body = {"reason": reason} if reason else None
        return self._session("POST", self._session_path(session_id, "cancel"), body)

    def get_agent_session(self, session_id: str) -> Session:
        return self._session("GET", self._session_path(session_id))

    def agent_session_heartbeat(self, session_id: str) -> Session:
        return self._session("POST", self._session_path(session_id, "heartbeat"))

    def reattach_agent_session(self, client_id: str) -> Optional[Session]:
        """The session created with ``client_id``, or None when there is none (StateSet's
        ``if existing:`` idiom)."""
        try:
            return self._session("POST", "/api/sessions/reattach", {"client_id": client_id})
        except NotFound:
            return None

    def execute_in_agent_session(self, session_id: str, command: Union[str, Sequence[str], None] = None,
                                 working_dir: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                                 timeout_seconds: Optional[float] = None, *,
                                 idempotency_key: Optional[str] = None, **extra: Any) -> ExecResult:
        """Runs a shell command in the session's sandbox: a list is an argv, a string runs under
        /bin/sh -c. A non-zero exit is not an exception (see ``exit_code``); a timeout raises
        Timeout with the partial ExecResult in ``.result``."""
        if isinstance(command, dict):  # the Node SDK's shape: (id, {"command": ..., ...})
            req = dict(command)
            command = req.pop("command", None)
            working_dir = req.pop("working_dir", working_dir)
            env = req.pop("env", env)
            timeout_seconds = req.pop("timeout_seconds", timeout_seconds)
            idempotency_key = req.pop("idempotency_key", idempotency_key)
            extra = {**req, **extra}
        if command is None:
            raise ValueError("command is required")
        body: Dict[str, Any] = {"command": command if isinstance(command, str) else list(command)}
        if working_dir is not None:
            body["working_dir"] = working_dir
        if env:
            body["env"] = env
        if timeout_seconds is not None:
            body["timeout_seconds"] = timeout_seconds
        body.update(extra)
        idempotency_key = body.pop("idempotency_key", None) or idempotency_key
        out = self.request("POST", self._session_path(session_id, "exec"), body,
                           timeout=self._run_timeout(timeout_seconds), partial=ExecResult.from_dict,
                           headers=_key_header(idempotency_key))
        return ExecResult.from_dict(out)

    def write_agent_session_file(self, session_id: str, path: str, content: Union[str, bytes],
                                 encoding: Optional[str] = None) -> FileInfo:
        """POST .../files (StateSet's shape). Bytes are sent base64-encoded."""
        if isinstance(content, (bytes, bytearray)):
            content, encoding = base64.b64encode(bytes(content)).decode(), "base64"
        body = {"path": path, "content": content}
        if encoding:
            body["encoding"] = encoding
        out = self.request("POST", self._session_path(session_id, "files"), body)
        return FileInfo.from_dict(out["file"])

    def update_agent_context(self, session_id: str, context: Optional[Dict[str, Any]] = None, *,
                             working_dir: Optional[str] = None, env_vars: Optional[Dict[str, str]] = None,
                             custom_state: Optional[Dict[str, Any]] = None) -> Session:
        """PATCH .../context: the keys given replace the session's (working_dir, env_vars,
        custom_state); applied to the live kernel and kept across rotations."""
        body = dict(context or {})
        for k, v in (("working_dir", working_dir), ("env_vars", env_vars),
                     ("custom_state", custom_state)):
            if v is not None:
                body[k] = v
        return self._session("PATCH", self._session_path(session_id, "context"), body)

    def get_agent_session_events(self, session_id: str, after_sequence: Optional[int] = None,
                                 limit: Optional[int] = None,
                                 event_type: Optional[str] = None,
                                 before_sequence: Optional[int] = None,
                                 order: Optional[str] = None) -> List[Event]:
        """GET .../events: oldest first, or with ``order="desc"`` the newest first (``limit``
        counted from them); ``before_sequence`` pages back from there."""
        out = self.request("GET", self._session_path(session_id, "events"),
                           query={"after_sequence": after_sequence, "limit": limit,
                                  "event_type": event_type, "before_sequence": before_sequence,
                                  "order": order})
        return [Event.from_dict(e) for e in out.get("events") or []]

    def register_agent_tool(self, session_id: str, tool: Optional[Dict[str, Any]] = None,
                            **fields: Any) -> Tool:
        """POST .../tools with {"name", "tool_type", "description", "input_schema"} (a dict, or
        the same as keyword arguments)."""
        body = dict(tool or {})
        body.update(fields)
        out = self.request("POST", self._session_path(session_id, "tools"), body)
        return Tool.from_dict(out["tool"])

    def list_agent_tools(self, session_id: str) -> List[Tool]:
        out = self.request("GET", self._session_path(session_id, "tools"))
        return [Tool.from_dict(t) for t in out.get("tools") or []]

    # ---- sessions (ERA names) ---------------------------------------------------------------

    def create_session(self, session_id: Optional[str] = None, **fields: Any) -> Session:
        """POST /api/sessions with ``session_id`` and any Session request field."""
        return self.create_agent_session(session_id=session_id, **fields)

    def get_session(self, session_id: str) -> Session:
        return self.get_agent_session(session_id)

    def list_sessions(self) -> List[Session]:
        """Every session of the token's tenant, oldest first, in one answer (see iter_sessions)."""
        out = self.request("GET", "/api/sessions")
        return [Session.from_dict(s) for s in out.get("sessions") or []]

    def list_sessions_page(self, limit: int = 100, cursor: Optional[str] = None,
                           newest: bool = False) -> Tuple[List[Session], Optional[str]]:
        """One page of GET /api/sessions: up to ``limit`` sessions (1..1000) after ``cursor`` (the
        cursor of the page before; None for the first), oldest first or ``newest`` first. Returns
        the sessions and the next page's cursor (None when this page is the last)."""
        query: Dict[str, Any] = {"limit": limit, "cursor": cursor, "order": "desc" if newest else None}
        out = self.request("GET", "/api/sessions", query=query)
        return [Session.from_dict(s) for s in out.get("sessions") or []], out.get("next_cursor")

    def iter_sessions(self, page_size: int = 100, newest: bool = False) -> Iterator[Session]:
        """Every session of the token's tenant, fetched a page at a time: a tenant with thousands
        of sessions never needs one answer holding them all. Sessions deleted or created meanwhile
        neither repeat one nor skip one that existed throughout."""
        cursor: Optional[str] = None
        while True:
            page, cursor = self.list_sessions_page(page_size, cursor, newest)
            yield from page
            if cursor is None:
                return

    def update_session(self, session_id: str, data: Dict[str, Any]) -> Session:
        """PATCH /api/sessions/{id}: merges ``data`` into the session's metadata."""
        return self._session("PATCH", self._session_path(session_id), {"data": data})

    def delete_session(self, session_id: str) -> None:
        self.request("DELETE", self._session_path(session_id))

    def interrupt(self, session_id: str) -> Session:
        return self._session("POST", self._session_path(session_id, "interrupt"))

    def restart(self, session_id: str) -> Session:
        return self._session("POST", self._session_path(session_id, "restart"))

    # ---- running code (ERA flow) -----------------------------------------------------------

    def run(self, session_id: str, code: str, update_data: Optional[Dict[str, Any]] = None,
            timeout: Optional[float] = None, env: Optional[Dict[str, str]] = None, *,
            idempotency_key: Optional[str] = None, stdin: Optional[str] = None) -> Execution:
        """POST .../run. Code that raises is not an exception: the answer has status "error" and
        ``.error``. A timeout raises Timeout, a kernel death KernelDied, both with the partial
        Execution in ``.result``. A pending session is started by its first run.

        ``stdin`` is what the code's ``input()`` reads, a line per call; past its end ``input()`` raises EOFError. Without it ``input()`` raises
        StdinNotImplementedError (``stream_run`` answers prompts as they come instead).

        ``idempotency_key`` (default: a new one per call) makes the call's retries, and yours with
        the same key, answer the first attempt's result instead of running the code again; a
        first attempt cut off before its answer was stored raises RunInterrupted."""
        body: Dict[str, Any] = {"code": code}
        if update_data:
            body["update_data"] = update_data
        if timeout is not None:
            body["timeout_seconds"] = timeout
        if env:
            body["env"] = env
        if stdin is not None:
            body["stdin"] = stdin
        out = self.request("POST", self._session_path(session_id, "run"), body,
                           timeout=self._run_timeout(timeout), partial=Execution.from_dict,
                           headers=_key_header(idempotency_key))
        return Execution.from_dict(out)

    def execute(self, code: str, language: str = "python",
                timeout: Optional[float] = None, *, idempotency_key: Optional[str] = None,
                stdin: Optional[str] = None) -> Execution:
        """POST /api/execute: runs code in a throwaway session, once: ``idempotency_key`` (default: a
        new one per call) makes the call's retries, and yours with the same key, answer the first
        attempt's result instead of running the code again. ``stdin`` as ``run``'s."""
        body: Dict[str, Any] = {"code": code, "language": language}
        if timeout is not None:
            body["timeout_seconds"] = timeout
        if stdin is not None:
            body["stdin"] = stdin
        out = self.request("POST", "/api/execute", body, timeout=self._run_timeout(timeout),
                           partial=Execution.from_dict, headers=_key_header(idempotency_key))
        return Execution.from_dict(out)

    # ---- files ------------------------------------------------------------------------------

    def list_files(self, session_id: str) -> List[FileInfo]:
        out = self.request("GET", self._session_path(session_id, "files"))
        return [FileInfo.from_dict(f) for f in out.get("files") or []]

    def read_file(self, session_id: str, path: str) -> bytes:
        """The file's bytes (``.decode()`` them for text)."""
        return self.request("GET", self._session_path(session_id, "files") + "/" + _file_url_path(path),
                            binary=True)

    def write_file(self, session_id: str, path: str, content: Union[str, bytes]) -> Optional[FileInfo]:
        """PUT the raw bytes (str is UTF-8 encoded); parent directories are created."""
        if isinstance(content, str):
            content = content.encode()
        out = self.request("PUT", self._session_path(session_id, "files") + "/" + _file_url_path(path),
                           raw=bytes(content))
        return FileInfo.from_dict(out["file"]) if isinstance(out, dict) and "file" in out else None

    def delete_file(self, session_id: str, path: str) -> None:
        self.request("DELETE", self._session_path(session_id, "files") + "/" + _file_url_path(path))

    # ---- checkpoints --------------------------------------------------------------------------

    def list_checkpoints(self, session_id: str) -> List[Checkpoint]:
        """The session's checkpoints, newest first."""
        out = self.request("GET", self._session_path(session_id, "checkpoints"))
        return [Checkpoint.from_dict(c) for c in out.get("checkpoints") or []]

    def create_checkpoint(self, session_id: str) -> Dict[str, Any]:
        """Takes a checkpoint now (the session needs a live kernel); returns its summary."""
        return self.request("POST", self._session_path(session_id, "checkpoint"))["checkpoint"]

    def restore_checkpoint(self, session_id: str, checkpoint_id: str) -> RestoreResult:
        """Puts the session back to that checkpoint (namespace and files) in a fresh kernel."""
        out = self.request("POST", self._session_path(session_id, "checkpoints", checkpoint_id, "restore"))
        return RestoreResult.from_dict(out.get("restore") or {}, Session.from_dict(out["session"]))

    def get_usage(self, session_id: str) -> Usage:
        """What the session has used since it was created: CPU seconds, memory peak, stored bytes."""
        return Usage.from_dict(self.request("GET", self._session_path(session_id, "usage"))["usage"])

    # ---- forks and notebooks ------------------------------------------------------------------

    def fork(self, session_id: str, new_session_id: Optional[str] = None,
             checkpoint_id: Optional[str] = None) -> Session:
        """A new session with the namespace and files of a checkpoint of this one (default: its
        current state), sharing the stored data; the two are independent afterwards."""
        body = {k: v for k, v in (("session_id", new_session_id), ("checkpoint_id", checkpoint_id)) if v}
        return self._session("POST", self._session_path(session_id, "fork"), body)

    def fork_many(self, session_id: str, count: int, new_session_id: Optional[str] = None,
                  checkpoint_id: Optional[str] = None) -> List[Session]:
        """``count`` (1..100) new sessions from one checkpoint of this one, as ``fork`` makes one,
        all or none: over the tenant's sessions quota (a CarryoverError of code quota_exceeded),
        a bad count (InvalidRequest) or a taken id (Conflict),
        none is made. With ``new_session_id`` they are named ``new_session_id-1`` .. ``-count``."""
        body = {k: v for k, v in (("session_id", new_session_id), ("checkpoint_id", checkpoint_id)) if v}
        body["count"] = count
        out = self.request("POST", self._session_path(session_id, "fork"), body)
        return [Session.from_dict(d) for d in out["sessions"]]

    def get_notebook(self, session_id: str) -> Dict[str, Any]:
        """The session's history as an nbformat 4.5 notebook (a dict; ``json.dump`` it to a .ipynb)."""
        return json.loads(self.request("GET", self._session_path(session_id, "notebook"), binary=True))

    def run_notebook(self, session_id: str, notebook: Union[Dict[str, Any], str, bytes],
                     continue_on_error: bool = False) -> Dict[str, Any]:
        """Runs the code cells of a notebook (a dict, its JSON text, or a .ipynb path) into the
        session in order, stopping at the first failing cell unless ``continue_on_error``. Returns
        ``{"cells": [{"index", "result" | "error"}], "ran", "stopped_at"?}``."""
        if isinstance(notebook, str) and notebook.endswith(".ipynb"):
            with open(notebook, "rb") as f:
                notebook = f.read()
        raw = notebook if isinstance(notebook, bytes) else (
            notebook.encode() if isinstance(notebook, str) else json.dumps(notebook).encode())
        query = {"continue_on_error": "true"} if continue_on_error else None
        return self.request("POST", self._session_path(session_id, "notebook"), raw=raw, query=query,
                            timeout=self._run_timeout(3600))

    # ---- portable sessions (docs/export-format.md) ------------------------------------------

    def export_session(self, session_id: str, path: Optional[str] = None,
                       checkpoint_id: Optional[str] = None, events: bool = False) -> Union[str, bytes]:
        """Streams the session's archive (its namespace, files, packages and settings; a checkpoint
        of it with ``checkpoint_id``, else its current state) into the file ``path``, written beside
        it and renamed once whole, and returns ``path``; without ``path`` returns the bytes. With
        ``events`` the archive also carries the session's event log (an archive of version 2),
        which ``import_session`` appends to the new session's log (its ``"events"`` count)."""
        url = self.base_url + self._session_path(session_id, "export")
        query = {}
        if checkpoint_id:
            query["checkpoint_id"] = checkpoint_id
        if events:
            query["events"] = "true"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        req = urllib.request.Request(url, method="GET", headers=self._headers())
        try:
            resp = urllib.request.urlopen(req, timeout=self._run_timeout(3600))
        except urllib.error.HTTPError as e:
            raise self._decode_error(e.code, e.read()) from None
        with resp:
            if path is None:
                return resp.read()
            tmp = "%s.%d.part" % (path, os.getpid())
            try:
                with open(tmp, "wb") as f:
                    while True:
                        block = resp.read(1 << 20)
                        if not block:
                            break
                        f.write(block)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
        return path

    def import_session(self, archive: Union[str, bytes], new_session_id: Optional[str] = None) -> Dict[str, Any]:
        """Makes a new session of this tenant from an archive (a file path, streamed, or its bytes).
        Returns ``{"session", "checkpoint_id", "source", "chunks", "chunks_present", "bytes_written",
        "events", "warnings"}``; a refused archive raises InvalidRequest (or PayloadTooLarge) whose
        ``details["reason"]`` says why (truncated, corrupt, digest, path, ...)."""
        url = self.base_url + "/api/sessions/import"
        if new_session_id:
            url += "?" + urllib.parse.urlencode({"session_id": new_session_id})
        headers = {"Content-Type": "application/x-tar"}
        f = None
        if isinstance(archive, (bytes, bytearray)):
            data: Any = bytes(archive)
        else:
            f = open(archive, "rb")
            data = f
            headers["Content-Length"] = str(os.fstat(f.fileno()).st_size)
        try:
            req = urllib.request.Request(url, data=data, method="POST", headers=self._headers(headers))
            try:
                with urllib.request.urlopen(req, timeout=self._run_timeout(3600)) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as e:
                raise self._decode_error(e.code, e.read()) from None
        finally:
            if f is not None:
                f.close()

    # ---- events (plain name) ----------------------------------------------------------------

    def events(self, session_id: str, after_sequence: Optional[int] = None,
               limit: Optional[int] = None, event_type: Optional[str] = None,
               before_sequence: Optional[int] = None, order: Optional[str] = None) -> List[Event]:
        return self.get_agent_session_events(session_id, after_sequence, limit, event_type,
                                             before_sequence, order)

    # ---- streaming (websocket; needs python3-websocket) -------------------------------------

    def stream_run(self, session_id: str, code: str, *, on_stdout=None, on_stderr=None,
                   on_result=None, on_error=None, on_input=None, on_output=None,
                   timeout: Optional[float] = None,
                   idempotency_key: Optional[str] = None) -> Execution:
        """Runs code over the session's websocket, calling back as the kernel produces:
        ``on_stdout(text)``/``on_stderr(text)`` per stream chunk, ``on_result(Result)`` per rich
        result, ``on_error(ExecutionError)`` for the exception the code raised, and
        ``on_input(prompt, password) -> str`` to answer ``input()`` (None, or no on_input: the
        end of input, input() raises EOFError).
        ``on_output(dict)`` sees every raw output. Returns the Execution once the turn (and its
        checkpoint) is over; API errors (timeout, kernel_died, ...) raise with ``.result``. A
        websocket that drops mid-run (a server restart) is reconnected and the run sent again
        with the same ``idempotency_key`` (default: a new one per call): it runs once."""
        from .stream import stream_run
        return stream_run(self, session_id, code, on_stdout=on_stdout, on_stderr=on_stderr,
                          on_result=on_result, on_error=on_error, on_input=on_input,
                          on_output=on_output, timeout=timeout, idempotency_key=idempotency_key)

    def stream_events(self, session_id: str, after_sequence: int = 0):
        """Yields the stored events after ``after_sequence``, then live ones, as they happen
        (an iterator over the websocket; close it to stop)."""
        from .stream import stream_events
        return stream_events(self, session_id, after_sequence)


# StateSet's class name, so `client = StateSetSandbox(base_url=..., auth_token=...)` ports as is.
StateSetSandbox = Carryover
