"""Two costs of every execute_request that buy nothing for the server, taken off at the agent's install.

* The agent's answers (JSONText) come back as user expressions, and IPython formats each one with
  every display formatter (text/plain, HTML, Markdown, SVG, PNG, JPEG, LaTeX, JSON, JavaScript, PDF,
  each through a decorator that binds its arguments with inspect): ~0.4 ms a turn for a text/plain
  that is the string itself (JSONText's repr). A JSONText is formatted as exactly that; any other
  value (a front door client's own user expressions) goes through the formatters as before.
* ipykernel sleeps 0.5 ms (Kernel._execute_sleep) before each execute_reply, "so that output makes it
  to the clients" first. The server waits for the request's idle status on IOPub, which the kernel
  publishes after the request's every output, and ipykernel's flush before the reply already waits
  for the IOPub thread to send what was written: the sleep only delays every answer. A value set
  explicitly after the install (a test holding that moment open) stands."""

from .common import JSONText


def install(shell):
    """Installs both on shell (an IPython shell; its kernel when it has one). Idempotent."""
    fmt = getattr(shell, "_format_user_obj", None)
    if fmt is not None and not getattr(fmt, "_carryover", False):
        shell._format_user_obj = _plain_json(fmt)
    kernel = getattr(shell, "kernel", None)
    if kernel is not None and getattr(kernel, "_execute_sleep", None) == _IPYKERNEL_SLEEP:
        kernel._execute_sleep = 0


_IPYKERNEL_SLEEP = 0.0005  # ipykernel's default: only that is turned off


def _plain_json(fmt):
    def format_user_obj(obj):
        if type(obj) is JSONText:
            return {"status": "ok", "data": {"text/plain": str(obj)}, "metadata": {}}
        return fmt(obj)

    format_user_obj._carryover = True
    return format_user_obj
