"""carryover: Python SDK for persistent IPython sessions over HTTP and websockets.

    from carryover import Carryover
    client = Carryover("http://127.0.0.1:8080", auth_token="...")
    s = client.create_agent_session(name="demo", budget={"iteration_limit": 100})
    client.run(s.id, "x = 41")
    print(client.run(s.id, "x + 1").result)   # "42"

StateSet agent-session calls (create_agent_session, execute_in_agent_session, ...), the ERA run
flow (run, execute), an E2B-style Sandbox (run_code -> Execution with results/logs/error), files,
checkpoints, events and websocket streaming. HTTP uses the standard library only; streaming
needs websocket-client (Debian's python3-websocket).
"""

from .client import Carryover, StateSetSandbox, new_idempotency_key
from .errors import (BudgetExceeded, CarryoverError, Conflict, ConnectionFailed, InternalError,
                     InvalidRequest, KernelDied, NotFound, PayloadTooLarge, SessionClosed,
                     SessionPaused, Timeout, Unauthorized, IdempotencyKeyReused,
                     RunInterrupted)
from .sandbox import Sandbox
from .stream import INPUT_EOF
from .types import (BudgetConsumed, Checkpoint, Event, ExecResult, Execution, ExecutionError,
                    FileInfo, Logs, RestoreResult, Result, RunResult, Session, Tool, Usage)

Client = Carryover

__all__ = [
    "Carryover", "Client", "StateSetSandbox", "Sandbox", "new_idempotency_key", "INPUT_EOF",
    "CarryoverError", "ConnectionFailed", "InvalidRequest", "Unauthorized", "NotFound",
    "Conflict", "SessionPaused", "SessionClosed", "BudgetExceeded", "PayloadTooLarge", "Timeout",
    "KernelDied", "InternalError", "IdempotencyKeyReused", "RunInterrupted",
    "BudgetConsumed", "Checkpoint", "Event", "ExecResult", "Execution", "ExecutionError",
    "FileInfo", "Logs", "RestoreResult", "Result", "RunResult", "Session", "Tool", "Usage",
]
__version__ = "1.3.0"
