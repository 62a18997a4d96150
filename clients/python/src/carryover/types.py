"""Typed answers of the API. Every object keeps the JSON it was made from in ``raw``, so fields
the server adds later stay reachable."""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _build(cls, d: Optional[Dict[str, Any]], **override):
    """cls from the keys of d it knows, plus raw=d."""
    d = d or {}
    names = {f.name for f in dataclasses.fields(cls)}
    kw = {k: v for k, v in d.items() if k in names}
    kw.update(override)
    if "raw" in names:
        kw["raw"] = d
    return cls(**kw)


@dataclass
class BudgetConsumed:
    cost_cents: float = 0.0
    iterations: int = 0
    duration_seconds: float = 0.0
    cpu_seconds: float = 0.0
    memory_gib_hours: float = 0.0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Session:
    """The API's Session object. ``agent_context``, ``budget``, ``sandbox``, ``rotation``, ``data``
    and ``last_checkpoint`` are plain dicts (``session.agent_context["custom_state"]``, as in
    StateSet's Python SDK); ``budget_consumed`` has attributes (``.cost_cents``, ``.iterations``)."""
    id: str = ""
    name: str = ""
    language: str = ""
    state: str = ""
    sandbox: Dict[str, Any] = field(default_factory=dict)
    data: Dict[str, Any] = field(default_factory=dict)
    agent_context: Dict[str, Any] = field(default_factory=dict)
    budget: Dict[str, Any] = field(default_factory=dict)
    budget_consumed: BudgetConsumed = field(default_factory=BudgetConsumed)
    rotation: Dict[str, Any] = field(default_factory=dict)
    client_id: Optional[str] = None
    last_checkpoint: Optional[Dict[str, Any]] = None
    execution_count: int = 0
    stop_reason: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    last_activity: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Session":
        return _build(cls, d, budget_consumed=_build(BudgetConsumed, d.get("budget_consumed")))


@dataclass
class ExecResult:
    """The answer of a shell command (``execute_in_agent_session``)."""
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    duration_ms: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ExecResult":
        return _build(cls, d)

    @property
    def stdout_bytes(self) -> bytes:
        """The output's exact bytes: the server's ``stdout_base64`` when the output was not UTF-8
        (``stdout`` then holds U+FFFD for what a string could not carry), else ``stdout`` encoded."""
        return _exact(self.raw.get("stdout_base64"), self.stdout)

    @property
    def stderr_bytes(self) -> bytes:
        """As ``stdout_bytes``, of stderr."""
        return _exact(self.raw.get("stderr_base64"), self.stderr)


def _exact(b64: Optional[str], text: str) -> bytes:
    return base64.b64decode(b64) if b64 else text.encode("utf-8")


@dataclass
class Result:
    """A rich result (E2B style): an ``execute_result`` or ``display_data`` output. Each format is
    a string: ``png``/``jpeg``/``pdf`` are base64 as the kernel sent them."""
    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None
    jpeg: Optional[str] = None
    gif: Optional[str] = None
    pdf: Optional[str] = None
    latex: Optional[str] = None
    json: Any = None
    javascript: Optional[str] = None
    is_main_result: bool = False
    execution_count: Optional[int] = None
    data: Dict[str, Any] = field(default_factory=dict, repr=False)
    metadata: Dict[str, Any] = field(default_factory=dict, repr=False)

    _MIMES = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown",
              "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg",
              "image/gif": "gif", "application/pdf": "pdf", "text/latex": "latex",
              "application/json": "json", "application/javascript": "javascript"}

    @classmethod
    def from_output(cls, out: Dict[str, Any]) -> "Result":
        data = out.get("data") or {}
        kw = {attr: data[mime] for mime, attr in cls._MIMES.items() if mime in data}
        return cls(is_main_result=out.get("type") == "execute_result",
                   execution_count=out.get("execution_count"), data=data,
                   metadata=out.get("metadata") or {}, **kw)

    def formats(self) -> List[str]:
        """The formats present besides text: ["png", "html", ...]."""
        return [a for m, a in self._MIMES.items() if a != "text" and m in self.data]

    def image_bytes(self, fmt: str = "png") -> Optional[bytes]:
        """The decoded bytes of a binary image format (png, jpeg, gif), or None."""
        v = getattr(self, fmt, None)
        return base64.b64decode(v) if isinstance(v, str) else None


@dataclass
class Logs:
    """Stream output as the kernel sent it, chunk by chunk."""
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass
class ExecutionError:
    """The exception the code raised: ``name`` (e.g. ZeroDivisionError), ``value``, ``traceback``
    (the lines joined with newlines; ``traceback_lines`` keeps the list)."""
    name: str = ""
    value: str = ""
    traceback_lines: List[str] = field(default_factory=list, repr=False)

    @property
    def traceback(self) -> str:
        return "\n".join(self.traceback_lines)

    # ERA / Jupyter names.
    @property
    def ename(self) -> str:
        return self.name

    @property
    def evalue(self) -> str:
        return self.value

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ExecutionError":
        return cls(name=d.get("ename", ""), value=d.get("evalue", ""),
                   traceback_lines=list(d.get("traceback") or []))


@dataclass
class Execution:
    """The answer of a run (``run``, ``execute``, ``run_code``, ``stream_run``).

    ERA fields: ``status`` (ok|error|aborted), ``stdout``, ``stderr``, ``result`` (text/plain of
    the execute_result or None), ``outputs`` (raw output dicts), ``checkpoint``, ``restore`` (the
    report of a restore since the last answer, a dict: ``recomputed``, ``not_replayed``,
    ``skipped``, ``failed``; None when there was none).
    E2B views: ``results`` (rich results), ``logs.stdout``/``logs.stderr`` (lists of chunks),
    ``error`` (ExecutionError or None), ``text``.
    """
    session_id: Optional[str] = None
    execution_count: Optional[int] = None
    status: str = ""
    stdout: str = ""
    stderr: str = ""
    result: Optional[str] = None
    outputs: List[Dict[str, Any]] = field(default_factory=list, repr=False)
    error: Optional[ExecutionError] = None
    duration_ms: float = 0.0
    checkpoint: Optional[Dict[str, Any]] = field(default=None, repr=False)
    checkpoint_error: Optional[str] = None
    restore: Optional[Dict[str, Any]] = field(default=None, repr=False)
    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Execution":
        outputs = d.get("outputs") or []
        logs = Logs()
        results = []
        for o in outputs:
            t = o.get("type")
            if t == "stream":
                (logs.stderr if o.get("name") == "stderr" else logs.stdout).append(o.get("text", ""))
            elif t in ("execute_result", "display_data"):
                results.append(Result.from_output(o))
        err = d.get("error")
        return _build(cls, d, outputs=outputs, logs=logs, results=results,
                      error=ExecutionError.from_dict(err) if err else None)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def text(self) -> Optional[str]:
        """The text of the main (execute_result) result, or None."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None


# RunResult is the ERA-flow name of the same answer.
RunResult = Execution


@dataclass
class Event:
    sequence_number: int = 0
    event_type: str = ""
    payload: Any = None
    created_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Event":
        return _build(cls, d)


@dataclass
class Tool:
    name: str = ""
    tool_type: str = ""
    description: str = ""
    input_schema: Any = None
    created_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Tool":
        return _build(cls, d)


@dataclass
class FileInfo:
    path: str = ""
    size: int = 0
    modified_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "FileInfo":
        return _build(cls, d)


@dataclass
class Checkpoint:
    id: str = ""
    turn: int = 0
    created_at: Optional[str] = None
    variables: List[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Checkpoint":
        return _build(cls, d, variables=list(d.get("variables") or []))


@dataclass
class Usage:
    """What a session has used since it was created, every kernel it had counted: CPU seconds of
    its kernels and shell commands, the largest resident memory any of its kernels was sampled at,
    its live kernel's now (0 without one), and what its kept checkpoints wrote to the store."""
    session_id: str = ""
    cpu_seconds: float = 0.0
    memory_gib_hours: float = 0.0
    memory_peak_bytes: int = 0
    memory_bytes: int = 0
    stored_bytes: int = 0
    checkpoints: int = 0
    sandbox: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Usage":
        return _build(cls, d)


@dataclass
class RestoreResult:
    """What a checkpoint restore put back (``restored`` names, ``failed``/``skipped`` dicts with
    name, type, reason; ``recomputed`` dicts with name, turn, turns, ms, verified, and
    ``not_replayed`` dicts with name, type, reason: what replay rebuilt and could not) and the
    session after it."""
    checkpoint_id: str = ""
    turn: int = 0
    restored: List[str] = field(default_factory=list)
    failed: List[Dict[str, Any]] = field(default_factory=list)
    skipped: List[Dict[str, Any]] = field(default_factory=list)
    recomputed: List[Dict[str, Any]] = field(default_factory=list)
    not_replayed: List[Dict[str, Any]] = field(default_factory=list)
    files: int = 0
    cwd: str = ""
    duration_ms: float = 0.0
    session: Optional[Session] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any], session: Optional[Session] = None) -> "RestoreResult":
        return _build(cls, d, restored=list(d.get("restored") or []),
                      failed=list(d.get("failed") or []), skipped=list(d.get("skipped") or []),
                      recomputed=list(d.get("recomputed") or []),
                      not_replayed=list(d.get("not_replayed") or []), session=session)
