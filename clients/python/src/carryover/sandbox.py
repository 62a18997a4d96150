"""E2B-style use: a Sandbox is one session, with run_code, files and commands."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from .client import Carryover
from .errors import NotFound
from .types import ExecResult, Execution, FileInfo


class _Files:
    def __init__(self, sbx: "Sandbox"):
        self._sbx = sbx

    def list(self) -> List[FileInfo]:
        return self._sbx.client.list_files(self._sbx.id)

    def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        """The file's content: a str (UTF-8), or bytes with format="bytes"."""
        data = self._sbx.client.read_file(self._sbx.id, path)
        return data if format == "bytes" else data.decode()

    def write(self, path: str, content: Union[str, bytes]) -> Optional[FileInfo]:
        return self._sbx.client.write_file(self._sbx.id, path, content)

    def remove(self, path: str) -> None:
        self._sbx.client.delete_file(self._sbx.id, path)

    delete = remove


class _Commands:
    def __init__(self, sbx: "Sandbox"):
        self._sbx = sbx

    def run(self, cmd: Union[str, List[str]], cwd: Optional[str] = None,
            envs: Optional[Dict[str, str]] = None, timeout: Optional[float] = None) -> ExecResult:
        return self._sbx.client.execute_in_agent_session(self._sbx.id, cmd, working_dir=cwd,
                                                         env=envs, timeout_seconds=timeout)


class Sandbox:
    """A session used E2B-style::

        with Sandbox(base_url=..., auth_token=...) as sbx:
            ex = sbx.run_code("x = 1; x + 1")
            ex.text            # "2"
            ex.logs.stdout     # ["..."] chunks
            ex.error           # None, or .name / .value / .traceback

    ``session_id`` reattaches to that session (its state is still there), creating it when it
    does not exist. Leaving the ``with`` block, or ``kill()``, deletes a session this object
    created; ``close()`` leaves it alive.
    """

    def __init__(self, session_id: Optional[str] = None, *, base_url: Optional[str] = None,
                 auth_token: Optional[str] = None, api_key: Optional[str] = None,
                 client: Optional[Carryover] = None, **create: Any):
        self.client = client or Carryover(base_url, auth_token, api_key=api_key)
        self._owned = False
        if session_id is not None:
            try:
                self.session = self.client.get_session(session_id)
            except NotFound:
                self.session = self.client.create_session(session_id, **create)
                self._owned = True
        else:
            self.session = self.client.create_session(**create)
            self._owned = True
        self.id = self.session.id
        self.files = _Files(self)
        self.commands = _Commands(self)

    @property
    def sandbox_id(self) -> str:
        return self.id

    def run_code(self, code: str, *, on_stdout=None, on_stderr=None, on_result=None,
                 on_error=None, on_input=None, timeout: Optional[float] = None,
                 envs: Optional[Dict[str, str]] = None) -> Execution:
        """Runs code in the session's kernel. With any callback it streams over the websocket
        (``envs`` then goes through the session's context instead of the run); else one HTTP
        run. A raise in the code is ``.error``, not an exception."""
        if any((on_stdout, on_stderr, on_result, on_error, on_input)):
            if envs:
                self.client.update_agent_context(self.id, env_vars=envs)
            return self.client.stream_run(self.id, code, on_stdout=on_stdout, on_stderr=on_stderr,
                                          on_result=on_result, on_error=on_error,
                                          on_input=on_input, timeout=timeout)
        return self.client.run(self.id, code, timeout=timeout, env=envs)

    def list_checkpoints(self):
        return self.client.list_checkpoints(self.id)

    def restore_checkpoint(self, checkpoint_id: str):
        return self.client.restore_checkpoint(self.id, checkpoint_id)

    def kill(self) -> None:
        """Deletes the session: kernel, checkpoints and files."""
        self.client.delete_session(self.id)
        self._owned = False

    def close(self) -> None:
        """Forgets the session without deleting it."""
        self._owned = False

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        if self._owned:
            self.kill()
