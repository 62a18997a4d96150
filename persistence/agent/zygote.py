"""A fork server for the test harness's "kernels" (test_agent.Harness.kernel).

Each kernel of the agent's tests must start as a restore does in production: in a new interpreter that
has imported IPython and the agent but none of the user's libraries (numpy, pandas, torch...), which
the restore must import itself. A fresh /usr/bin/python3 per kernel pays ~0.6 s of CPU before the
plan's first step (the interpreter, IPython's shell module, the agent); the tests start ~110 of them.
A zygote pays it once: ``python3 agent_harness.py --zygote`` imports what a fresh harness process
imports before main() (agent_harness's own imports, then IPython.core.interactiveshell, which
new_shell imports first), then forks one child per kernel. The child sets argv, cwd, environment and
stdin/stdout/stderr as subprocess.run would have, runs agent_harness.main (which makes the shell
instance: the zygote never does, so it holds no shell and no history thread, and it is
single-threaded when it forks) and ends with os._exit.

Every child of one zygote shares its hash seed (str hashes, so the order of sets of strings); kernels
in production each have their own. The kernels alternate between two zygotes, so a kernel that
restores what the kernel before it saved runs with another seed, as it would in production.

CARRYOVER_AGENT_TEST_FORK=0 runs each kernel as a fresh process instead (the old way)."""

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import traceback

FORK = os.environ.get("CARRYOVER_AGENT_TEST_FORK", "1") != "0"


def serve(main):
    """The zygote's loop: one JSON request a line on stdin ({"argv", "cwd", "env", "out", "err"}),
    answered on stdout with the child's pid, then its exit code (as subprocess's returncode)."""
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401 (new_shell's first import)

    req_in = os.fdopen(os.dup(0), "rb")
    ans_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # what the zygote itself might print cannot reach the protocol
    os.dup2(null, 1)
    for line in req_in:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            req_in.close()
            os.close(ans_out)
            _child(main, req, null)
        os.write(ans_out, b"%d\n" % pid)
        _, status = os.waitpid(pid, 0)
        os.write(ans_out, b"%d\n" % os.waitstatus_to_exitcode(status))


def _child(main, req, null):
    """Runs main() as the fresh process `python3 agent_harness.py argv...` would; never returns."""
    rc = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        os.dup2(null, 0)
        os.close(null)
        sys.argv = list(req["argv"])
        rc = 0
        main()
    except SystemExit as e:
        rc = _exit_code(e.code)
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        os._exit(rc)


def _exit_code(code):
    """The exit status the interpreter gives SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


class Zygote:
    """One zygote process, started with the environment its children get."""

    def __init__(self, python, harness, env):
        self.env = env
        self.p = subprocess.Popen([python, harness, "--zygote"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env, bufsize=0)  # unbuffered: select sees every line not yet read

    def run(self, argv, cwd, out, err, timeout):
        """The exit code of `python argv...` run by a child, its stdout and stderr to the files out
        and err; raises subprocess.TimeoutExpired after timeout seconds (the child killed)."""
        req = {"argv": argv, "cwd": cwd, "env": self.env, "out": out, "err": err}
        self.p.stdin.write((json.dumps(req) + "\n").encode())
        self.p.stdin.flush()
        pid = int(self._line(60))
        try:
            return int(self._line(timeout))
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            self._line(60)
            raise

    def _line(self, timeout):
        if not select.select([self.p.stdout], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(self.p.args, timeout)
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError("the harness's zygote ended (exit code %s)" % self.p.wait())
        return line

    def close(self):
        self.p.stdin.close()
        self.p.wait()


_pool = [None, None]  # the two zygotes, started on first use, used in turn
_turn = [0]


def run(python, harness, args, cwd, env, timeout):
    """Runs `python harness args...` in cwd with env (stdin /dev/null) as a child of a zygote, as
    subprocess.run(capture_output=True, text=True) would run it as a fresh process."""
    if any(z is not None and z.env != env for z in _pool):  # zygotes imported under another environment
        _close()
    i = _turn[0] % 2
    _turn[0] += 1
    if _pool[i] is None:
        _pool[i] = Zygote(python, harness, env)
    with tempfile.TemporaryDirectory(prefix="zygote-") as d:
        out, err = os.path.join(d, "out"), os.path.join(d, "err")
        rc = _pool[i].run([harness] + args, cwd, out, err, timeout)
        with open(out) as o, open(err) as e:
            return subprocess.CompletedProcess([python, harness] + args, rc, o.read(), e.read())


def _close():
    for i, z in enumerate(_pool):
        if z is not None:
            z.close()
            _pool[i] = None


atexit.register(_close)
