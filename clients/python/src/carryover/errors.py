"""Exceptions carrying the API's error codes (docs/api.md, "Errors")."""

from __future__ import annotations

from typing import Any, Dict, Optional


class CarryoverError(Exception):
    """An error answer of the API: ``{"error": {"code", "message", "details"}}``.

    ``code`` is stable (branch on it), ``message`` is for humans, ``status`` is the HTTP status
    (0 for an error frame received over the websocket or a connection failure). ``result`` is the
    partial answer timeouts and kernel deaths carry (an Execution or an ExecResult), else None.
    """

    code = "error"

    def __init__(self, message: str, *, code: Optional[str] = None, status: int = 0,
                 details: Optional[Dict[str, Any]] = None, result: Any = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.status = status
        self.details = details or {}
        self.result = result

    def __str__(self) -> str:
        if self.status:
            return "%d %s: %s" % (self.status, self.code, self.message)
        return "%s: %s" % (self.code, self.message)


class ConnectionFailed(CarryoverError):
    """The server could not be reached (no HTTP answer)."""
    code = "connection_failed"


class InvalidRequest(CarryoverError):
    code = "invalid_request"


class Unauthorized(CarryoverError):
    code = "unauthorized"


class NotFound(CarryoverError):
    code = "not_found"


class Conflict(CarryoverError):
    code = "conflict"


class SessionPaused(Conflict):
    code = "session_paused"


class SessionClosed(Conflict):
    code = "session_closed"


class BudgetExceeded(CarryoverError):
    code = "budget_exceeded"


class PayloadTooLarge(CarryoverError):
    code = "payload_too_large"


class Timeout(CarryoverError):
    """The run exceeded its timeout; the kernel was interrupted, its state kept. ``result`` holds
    what the run produced until then."""
    code = "timeout"


class KernelDied(CarryoverError):
    """The kernel died during the run; the session was restored from its last checkpoint.
    ``result`` holds what the run produced until then."""
    code = "kernel_died"


class InternalError(CarryoverError):
    code = "internal"


class IdempotencyKeyReused(CarryoverError):
    """The idempotency key was first used with another request: a new request needs a new key."""
    code = "idempotency_key_reused"


class RunInterrupted(Conflict):
    """The first attempt with this idempotency key was cut off (its server stopped) before its
    answer was stored: the code may have run, so the server does not run it again. Look at the
    session (its executions, its variables), then run again with a new key if needed."""
    code = "run_interrupted"


_BY_CODE = {c.code: c for c in (InvalidRequest, Unauthorized, NotFound, Conflict, SessionPaused,
                                SessionClosed, BudgetExceeded, PayloadTooLarge, Timeout,
                                KernelDied, InternalError, IdempotencyKeyReused, RunInterrupted)}
_BY_STATUS = {400: InvalidRequest, 401: Unauthorized, 404: NotFound, 409: Conflict,
              402: BudgetExceeded, 413: PayloadTooLarge, 504: Timeout, 502: KernelDied,
              500: InternalError, 422: IdempotencyKeyReused}


def error_for(code: Optional[str], message: str, status: int = 0,
              details: Optional[Dict[str, Any]] = None, result: Any = None) -> CarryoverError:
    """The exception class for an API code (or, for an unknown code, its HTTP status)."""
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or CarryoverError
    return cls(message, code=code or cls.code, status=status, details=details, result=result)
