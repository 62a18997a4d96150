"""carryover kernel template: a warm Python process that forks one kernel per request.

Started by the Go side (kernel/template) as ``python <this file> <config json>``. It imports
ipykernel and the snapshot agent's dependencies, runs the config's preload file (the agent's modules,
loaded but not installed: persistence.AgentPreload), imports ``persistence.pre_import``, builds the
kernels' IPython shell (_build_shell), calls the
preload's ``carryover_warm()`` if it defines one (the agent indexes the modules' objects; its
``carryover_child_io()`` is called in each child once the kernel's output streams exist), freezes the garbage
collector's view of those objects (gc.freeze: collections in a child never touch them, so their pages
stay shared copy-on-write), then waits on stdin for requests, one JSON object a line:

    {"id": 1, "spec": "/data/template/req-1.json"}      ("boxed": true, "holder": H for a boxed one)
    {"id": 2, "enter": true, "box": {...}, "holder": H}  a box entered ahead (see below)
    {"id": 3, "spec": "...", "boxed": true, "holder": H, "entered": 2}   a kernel in it

where the spec file (root's, 0600, read and removed by the child after the fork, so that no
kernel's environment ever sits in the template's heap, which every later child copies) holds

    {"args": ["-f", "/run/k/connection.json"], "env": {...}, "dir": "/ws", "log": "/run/k/log",
     "box": null or {"holder": H, "start": S, "cgroups": [...], "seccomp": "/path", "uid": U}}

and answers on stdout, one JSON object a line:

    {"ready": true, "pid": P}            once, when warm
    {"id": 1, "pid": C}                  the child that is the kernel ({"id": 1, "error": "..."})
    {"id": 2, "entered": C}              the first child of a box entered ahead
    {"id": 3, "error": "...", "unused": true}   no kernel was asked of that box (it may be forked into anew)
    {"exit": C, "status": S}             a child was reaped (S: the raw wait status)

The template runs no user code and starts no thread (a fork copies only the forking thread; a lock
held by another thread would stay locked in the child forever). It checks both before every fork.

A child is a fresh kernel in everything that is its own: it leads a new session and process group,
its stdin is /dev/null and its output goes to the kernel log, its environment and cwd are the
request's, the kernel app (its ZMQ context and sockets, its threads, its connection file) is made
after the fork, and so is the snapshot agent (installed by the server afterwards). IPython's shell
is the one exception: built in the template with the config every kernel of the server's has, it
is adopted by the child's kernel, which gives it what is the kernel's own (the kernel, its profile,
environment, home and cwd: _adopt); a kernel launched with any other config drops it and builds
its own.
Python's ``random`` reseeds itself at fork; numpy's legacy global RandomState does not, so it is
reseeded from the OS's entropy as a fresh interpreter's would be. PYTHONHASHSEED (str hashing) is
fixed at interpreter start and cannot change: children of one template share it.

A child dies with the server (not with the template, whose kill -9 must not take sessions with it):
a thread waits on a pidfd of the server's process.

A boxed request (kernel/sandbox made a bubblewrap box whose first process, the holder, sleeps) makes
the kernel inside that box: the first child joins the box's cgroups, takes the holder's rlimits,
setns()es into all the holder's namespaces at once (mount, pid, net, ipc, uts, cgroup, through a
pidfd checked against the holder's start time), forks the kernel (the first process of the box's pid
namespace born after the holder), says its pid and exits, so the kernel is reparented to the box's
init as a cold kernel's parent is. The kernel then leads a session of its own, drops every
capability and the bounding set, becomes the box's uid, sets no_new_privs, loads the server's
seccomp program, checks all of it in /proc/self/status, and only then builds the kernel app.

An enter request does the part of that which does not depend on the kernel ahead, for a box that
waits as a spare (kernel/sandbox's pool.spare_boxes): its first child enters the box and forks the
second there, which forks the waiting child and exits (the waiting child is then the box's init's
child, as a kernel is). A boxed request naming it then only hands the waiting child the kernel's
spec (the request's spec file names the same box), and it becomes the kernel: no fork is left on
the launch's path. An entered box whose children died (its box was killed) is forgotten when the
first child is reaped; one whose template died sees EOF and exits.
"""

import atexit
import gc
import importlib
import json
import os
import select
import signal
import sys
import threading
import traceback

import carryover_box as box  # written beside this file (box.py)

# Modules the snapshot agent imports when it is installed into a kernel: loaded here once.
AGENT_DEPS = ["ctypes", "resource", "site", "dill", "xxhash", "zstandard", "pickle", "ast", "hashlib", "base64", "json"]


def _say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _warm(modules, preload):
    """Imports what every kernel needs, runs the preload file (the snapshot agent's modules, loaded
    before pre_import as in a kernel started cold), then imports what the config pre-imports
    (missing ones are skipped)."""
    global _child_io
    # sys.path[0] is this script's dir; a kernel started by `python -m ipykernel_launcher` has the
    # cwd there and deletes it (never import from the cwd): the children match the latter.
    if sys.path and sys.path[0] in ("", os.path.dirname(os.path.abspath(__file__))):
        del sys.path[0]
    # MPLBACKEND (read by pyplot at import) is in our env as in every kernel's (kernel/template/env.go).
    import ipykernel.kernelapp  # noqa: F401  (the kernel app, IPython, zmq, tornado, jupyter_client)
    import ipykernel.ipkernel  # noqa: F401

    for name in AGENT_DEPS:
        _import(name)
    loaded = {"__name__": "carryover_preload"}
    if preload:
        try:
            with open(preload) as f:
                code = compile(f.read(), preload, "exec")
            exec(code, loaded)
        except Exception:  # noqa: BLE001  (each kernel then loads the agent itself, as a cold one does)
            traceback.print_exc()
    for name in modules:
        _import(name)
    _build_shell()  # before the agent's index, which then covers the modules the shell imported
    _preload_warm(loaded.get("carryover_warm"))
    _child_io = loaded.get("carryover_child_io")
    _compact_module_names()
    gc.collect()
    gc.freeze()


def _compact_module_names():
    """Gives sys.modules keys of its own, copies of the modules' names made one after the other, so
    they share a few pages. Every kernel builds set(sys.modules) at its start (IPython's init_code,
    for %reset --aggressive), which writes each key's reference count: with the names where each
    import had left them (~1,500 of them here, on ~900 pages), that copied ~900 of the template's
    pages into the kernel, 4 ms of its start; with the copies, ~140 pages, 0.4 ms. The keys are equal
    to the names and in the same order; nothing runs meanwhile (the collector is off, each module
    held), and a lookup by a name compares its text once its identity differs."""
    gc.disable()
    try:
        for name in list(sys.modules):
            module = sys.modules.pop(name)
            sys.modules[(name + ".")[:-1]] = module
    finally:
        gc.enable()


def _preload_warm(warm):
    """Calls the preload's carryover_warm, if it defines one: its work over what was imported (the
    agent's index of the modules' objects), done once here so that every child shares its result
    instead of redoing it, and copying the pages it touches."""
    if not callable(warm):
        return
    try:
        warm()
    except Exception:  # noqa: BLE001  (each kernel then does that work itself, as a cold one does)
        traceback.print_exc()


# The config of the shell built here (_build_shell): what the server's kernels are launched with
# besides their connection file ("-f FILE --HistoryManager.hist_file=:memory:", kernel/template's
# forkable and server/session/kernels), with no config file. A kernel whose app ends up with any
# other config builds its own shell, as a cold kernel does.
SHELL_CONFIG = {"HistoryManager": {"hist_file": ":memory:"}}
_shell_venv = None  # VIRTUAL_ENV when the shell was built (IPython reads it then)
_shell_extensions = ()  # the extensions loaded into it (_load_default_extensions)
_child_io = None  # the preload's carryover_child_io, called in a child once its streams exist


def _build_shell():
    """Builds the kernels' IPython shell (ipykernel's ZMQInteractiveShell, configured with
    SHELL_CONFIG) here, once: a child's kernel adopts it (_kernel_app) instead of building its own,
    which cost each kernel ~30 ms of CPU and ~3.5 MiB of private memory (its magics' argument
    parsers, traits, tables), now shared copy-on-write. The shell starts no thread (its history is
    in memory: no saving thread) and runs no user code. Best effort: on failure each child builds
    its own shell, as before."""
    global _shell_venv
    try:
        from ipykernel.compiler import XCachingCompiler
        from ipykernel.zmqshell import ZMQInteractiveShell
        from traitlets.config import Config

        shell = ZMQInteractiveShell.instance(config=Config(SHELL_CONFIG), compiler_class=XCachingCompiler)
        _shell_venv = os.environ.get("VIRTUAL_ENV")
        _warm_shell(shell)
        _load_default_extensions(shell)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        _drop_shell()


def _warm_shell(shell):
    """Pays here, once, what each kernel's first request paid after its fork: the input
    transformers' tokenizer compiles its regular expressions on first use, and the display
    formatter builds its formatters and imports their printers on first use (~7 ms of every forked
    kernel's first answer: the agent's install, an expression's result). Neither keeps anything of
    the input it is given (no history, no execution count, no output)."""
    shell.transform_cell("x = 1\n")
    shell.display_formatter.format(1)


def _load_default_extensions(shell):
    """Loads IPython's default extensions (storemagic) into the shell built here, as each kernel's
    app does at its start (init_extensions: 4.7 ms and ~100 page faults of a forked kernel's start,
    most of it a failed import of the short name, then the extension's magics built); a kernel that
    adopts this shell skips those (_kernel_app)."""
    global _shell_extensions
    from IPython.core.shellapp import InteractiveShellApp

    names = tuple(InteractiveShellApp.class_traits()["default_extensions"].default())
    for name in names:
        shell.extension_manager.load_extension(name)
    _shell_extensions = names


def _drop_shell():
    """Forgets the shell built here (a kernel whose config differs then builds its own)."""
    try:
        from ipykernel.zmqshell import ZMQInteractiveShell

        if ZMQInteractiveShell.initialized():
            atexit.unregister(ZMQInteractiveShell.instance().atexit_operations)
        ZMQInteractiveShell.clear_instance()
    except Exception:  # noqa: BLE001
        traceback.print_exc()


def _kernel_app():
    """The kernel app class: ipykernel's, which reads the server's argv without building traitlets'
    parser (parse_command_line), and whose kernel adopts the shell built in the template when
    the app's config is the one that shell was built with (its kernel class ipykernel's, nothing
    configured but the app itself and SHELL_CONFIG, VIRTUAL_ENV unchanged); otherwise the shell is
    dropped and the kernel builds its own. The app's config is known only once it has read its
    command line and config files, right before it makes the kernel."""
    from ipykernel import ipkernel, kernelapp
    from ipykernel.zmqshell import ZMQInteractiveShell

    if not ZMQInteractiveShell.initialized():
        return kernelapp.IPKernelApp

    class IPKernelApp(kernelapp.IPKernelApp):  # its name: the config's section, as a cold kernel's
        def parse_command_line(self, argv=None):
            """The server's kernel argv read as traitlets would read it, without building its
            parser (an argparse argument for every configurable trait of every class: ~15 ms of
            CPU, the largest part of what a kernel's start costs once the shell is adopted); any
            other argv is parsed by traitlets."""
            conn = _server_connection_file(argv)
            if conn is None:
                return super().parse_command_line(argv)
            from traitlets.config.loader import Config, DeferredConfigString

            self.argv = list(argv)
            self.cli_config = Config({"IPKernelApp": {"connection_file": conn},  # an alias: not deferred
                                      "HistoryManager": {"hist_file": DeferredConfigString(":memory:")}})
            self.update_config(self.cli_config)
            self.extra_args = []

        def init_kernel(self):
            shell = ZMQInteractiveShell.instance()
            config = {k: dict(v) for k, v in self.config.items() if k != "IPKernelApp"}
            if (self.kernel_class is not ipkernel.IPythonKernel or config != SHELL_CONFIG
                    or os.environ.get("VIRTUAL_ENV") != _shell_venv):
                _drop_shell()
                shell = None
            super().init_kernel()  # IPythonKernel takes the shell: ZMQInteractiveShell.instance()
            self._adopted = shell is not None
            if shell is not None:
                _adopt(shell, self)

        def init_io(self):
            """ipykernel's, then the preload's carryover_child_io (the agent's quick flush on the
            new streams, which its install gives a cold kernel's later). Best effort."""
            super().init_io()
            if callable(_child_io):
                try:
                    _child_io()
                except Exception:  # noqa: BLE001  (the streams keep ipykernel's flush)
                    traceback.print_exc()

        def init_extensions(self):
            """IPython's, without the default extensions the template's shell has loaded when it is
            this kernel's (_load_default_extensions). Asked again, IPython tries each short name as
            a top-level module first (a failed import that lists every sys.path dir, ~2-5 ms of a
            start) before it finds it loaded under its full name. So a top-level module of that
            name on the kernel's own path, which a cold kernel would try first, is not tried."""
            if not getattr(self, "_adopted", False):
                return super().init_extensions()
            default = self.default_extensions
            self.default_extensions = [e for e in default if e not in _shell_extensions]
            try:
                return super().init_extensions()
            finally:
                self.default_extensions = default

    return IPKernelApp


def _server_connection_file(argv):
    """The connection file of argv when argv is exactly what the server launches its kernels with
    ("-f FILE --HistoryManager.hist_file=:memory:"), else None."""
    if argv is None or len(argv) != 3 or argv[0] != "-f" or argv[2] != "--HistoryManager.hist_file=:memory:":
        return None
    return argv[1] if argv[1] and not argv[1].startswith("-") else None


def _adopt(shell, app):
    """Makes the shell built in the template this kernel's: what a shell built in the kernel takes
    from its kernel (the kernel itself, its profile), from its environment (the variables
    ZMQInteractiveShell sets, the home dir) and from its cwd (the directory history, _dh)."""
    from IPython.utils.path import get_home_dir
    from pathlib import Path
    from pickleshare import PickleShareDB

    shell.parent = shell.kernel = app.kernel
    shell.ipython_dir = app.ipython_dir
    shell.profile_dir = app.profile_dir
    shell.db = PickleShareDB(os.path.join(app.profile_dir.location, "db"))
    shell.starting_dir = os.getcwd()
    shell.home_dir = shell.logger.home_dir = get_home_dir()
    shell.history_manager.dir_hist[:] = [Path.cwd()]
    shell.init_environment()


def _import(name):
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001  (a module not installed is ignored, as pre_import says)
        pass


def _server_watch(server_pid):
    """Exits the child when the server's process ends (a kill -9 of the server included)."""
    try:
        fd = os.pidfd_open(server_pid)
    except OSError:
        os._exit(1)  # the server is already gone

    def wait():
        select.select([fd], [], [])
        os._exit(1)

    threading.Thread(target=wait, name="carryover-server-watch", daemon=True).start()


def _retitle(argv):
    """Makes /proc/PID/cmdline the kernel's argv, as a cold kernel's, so whoever looks for kernels
    by it (ps, tests) finds this one: written over the template's own argv area (the Go side pads it
    long enough; a longer argv is cut), the rest zeroed. Best effort: the kernel works without it."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        data = b"\0".join(os.fsencode(a) for a in argv)[: end - start - 1]
        fd = os.open("/proc/self/mem", os.O_RDWR)
        try:
            os.pwrite(fd, data.ljust(end - start, b"\0"), start)
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        pass


def _reseed():
    """Gives the child RNG state and secrets of its own, as a fresh interpreter has: numpy's legacy
    global RandomState, and multiprocessing's authkey (made at its import: siblings would share the
    key that guards their managers' and listeners' connections)."""
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()  # no argument: from the OS's entropy
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None:
        mp.current_process().authkey = os.urandom(32)


def _spec(req):
    """Reads and removes the request's spec file (only a child does: see the module doc)."""
    path = req["spec"]
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    finally:
        os.unlink(path)


def _child(req, cfg, keep_out):
    """Becomes the kernel the request asked for, unsandboxed; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in keep_out:
            os.close(fd)
        spec = _spec(req)
        _raise_oom_score(spec.get("oom_score_adj"))
        os.setsid()
        log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        _std(log)
        _become(spec)
        _server_watch(cfg["server_pid"])
        code = _launch(spec["args"])
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        _exit(code)


def _std(log):
    """stdin from /dev/null, stdout and stderr to the kernel log (fd log, closed)."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _become(spec):
    """The kernel's environment, cwd and title."""
    os.environ.clear()
    os.environ.update(spec["env"])
    if spec.get("dir"):
        os.chdir(spec["dir"])
    _retitle([sys.executable, "-m", "ipykernel_launcher"] + list(spec["args"]))


def _launch(args):
    """Runs the kernel app, then the atexit handlers (the user's among them) as the interpreter's
    exit would: the child leaves with os._exit, which runs none. Answers the app's exit code."""
    _reseed()
    sys.argv = ["ipykernel_launcher"] + list(args)
    code = 0
    try:
        _kernel_app().launch_instance(argv=list(args))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    atexit._run_exitfuncs()  # prints a failing handler's traceback to the kernel log and goes on
    return code


def _exit(code):
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _fork_boxed(req, cfg, keep_out):
    """Makes the kernel inside the box the request names (see the module doc); answers its pid, the
    host's number of it: the one child of the box's init besides the holder."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        _boxed_child(req, keep_out, wr)
    os.close(wr)
    # Until the answer's end, not EOF: the first child's exit (unmapping its copy of the template's
    # address space) is ~5 ms the launch need not wait for; it is reaped on its SIGCHLD (main).
    got = b""
    while not got.endswith(b"\n"):
        b = os.read(rd, 4096)
        if not b:
            break
        got += b
    os.close(rd)
    return _kernel_of(req, got.decode(errors="replace").strip(), "boxed fork")


def _kernel_of(req, answer, what):
    """The answer to a boxed fork whose first child said answer ("init PID" or "error ..."): the
    kernel is the one child of the box's init besides the holder."""
    word, _, rest = answer.partition(" ")
    if word != "init" or not rest.strip().isdigit():
        return {"id": req.get("id"), "error": what + ": " + (rest or "the first child died")}
    init = int(rest)
    kernels = [int(p) for p in _children(init) if int(p) != req["holder"]]
    if len(kernels) != 1:
        return {"id": req.get("id"), "error": what + ": the box's init has children %s" % _children(init)}
    return {"id": req.get("id"), "pid": kernels[0]}


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return f.read().split()
    except OSError:
        return []


def _boxed_child(req, keep_out, answer):
    """The first child: enters the box, forks a second one there, which forks the kernel and exits
    (so the kernel is reparented to the box's init: a process whose parent dies is given to the
    reaper of its parent's pid namespace), reaps it, tells the box's init's pid and exits."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in keep_out:
            os.close(fd)
        spec = _spec(req)
        log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        entered = box.enter(spec["box"])
        pid = os.fork()
        if pid == 0:
            os.close(answer)
            if os.fork() == 0:
                _boxed_kernel(spec, entered, log)
            os._exit(0)
        _answer_init(pid, entered, answer)
    except BaseException as e:  # noqa: BLE001
        _answer_error(e, answer)


def _answer_init(second, entered, answer):
    """The first child's end once the kernel is forked: reaps the second child and tells the box's
    init's pid (the kernel is its child now). Never returns."""
    _reap_second(second)
    os.write(answer, b"init %d\n" % entered["init"])
    os._exit(0)


def _answer_error(e, answer):
    """The first child's end on error e: tells where it failed (unless the template is gone, and with
    it whoever would read it). Never returns."""
    where = traceback.extract_tb(e.__traceback__)[-1]
    try:
        os.write(answer, ("error %r (at %s:%d)\n" % (e, os.path.basename(where.filename), where.lineno)).encode())
    except OSError:
        pass
    os._exit(1)


# Boxes entered ahead (_enter_box), by the enter request's id: {"pid": the first child, "ctl": the
# pipe its second child waits on, "ans": the pipe the first child answers on, "holder": H}.
_entered = {}


def _entered_fds():
    """The template's ends of the entered boxes' pipes: a child closes them, so that a second child
    waiting for its kernel sees EOF (and exits) when the template is gone, whoever else it forked."""
    return tuple(fd for e in _entered.values() for fd in (e["ctl"], e["ans"]))


def _forget_entered(pid):
    """Drops the entered box whose first child was reaped (its box was killed, or its kernel made)."""
    for key, e in list(_entered.items()):
        if e["pid"] == pid:
            del _entered[key]
            os.close(e["ctl"])
            os.close(e["ans"])


def _enter_box(req, keep_out):
    """A boxed fork's first half, for a box that waits as a spare before any kernel is asked of it:
    the first child enters the box and forks the second there, which waits for the kernel's spec
    (_waiting_child). Answers at once with the first child's pid: what entering the box costs (the
    cgroup move waits for an RCU grace period, ~10-15 ms) is paid while nobody waits; whether it
    succeeded is read when the kernel is asked for (_fork_entered)."""
    ctl_r, ctl_w = os.pipe()
    ans_r, ans_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ctl_w)
        os.close(ans_r)
        _entering_child(req, keep_out, ctl_r, ans_w)
    os.close(ctl_r)
    os.close(ans_w)
    _entered[req["id"]] = {"pid": pid, "ctl": ctl_w, "ans": ans_r, "holder": req["holder"]}
    return {"id": req["id"], "entered": pid}


def _entering_child(req, keep_out, ctl, answer):
    """The first child of an entered box: keeps a descriptor of the host's root (the kernel's spec
    file and log are host paths, out of the box's mount namespace's view), enters the box, says so,
    forks the second child there (which forks the waiting child and exits) and waits until the
    waiting child took a kernel's spec; then tells the box's init's pid, as _boxed_child does.
    Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in keep_out:
            os.close(fd)
        # Not the template's stdin and stdout: they wait long, and the server takes the stdout's
        # EOF as the template's end (a template killed is restarted only then).
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        want = req["box"]
        root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        entered = box.enter(want)
        os.write(answer, b"entered\n")
        took_r, took_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(answer)
            os.close(took_r)
            _second_child(ctl, root, want, entered, took_w)
        os.close(ctl)
        os.close(root)
        os.close(took_w)
        _reap_second(pid)
        if os.read(took_r, 1) != b"k":  # EOF: the waiting child died (its box was killed)
            raise RuntimeError("the box's waiting child ended before it took a kernel's spec")
        os.write(answer, b"init %d\n" % entered["init"])
        os._exit(0)
    except BaseException as e:  # noqa: BLE001
        _answer_error(e, answer)


def _reap_second(pid):
    """Reaps the second child of a box, which exits once it has forked."""
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError("the second child ended with status %d" % status)


def _second_child(ctl, root, want, entered, took):
    """The second child of an entered box, in the box's pid namespace: forks the waiting child and
    exits, so that the waiting child is the box's init's child, as its kernel must be. The fork a
    kernel needs (~5-8 ms of copying the template's page tables here) is then paid while the box
    waits as a spare, not while a launch waits for its kernel. Never returns."""
    code = 3
    try:
        if os.fork() == 0:
            _waiting_child(ctl, root, want, entered, took)
        code = 0
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        os._exit(code)


def _raise_oom_score(adj):
    """Raises the kernel-to-be's oom_score_adj to adj (its spec's, or the box's from EnterBox) while
    it is one thread: the launch's kernel.RaiseOOMScore then finds it set and writes nothing, where
    its write to the kernel, a process with threads, walks every process on the host. Never lowers
    it (as RaiseOOMScore). Raising needs no privilege; a failure leaves it to the launch's call."""
    if not adj:
        return
    try:
        with open("/proc/self/oom_score_adj", "r+") as f:
            if int(f.read().strip() or 0) < adj:
                f.seek(0)
                f.write(str(adj))
    except (OSError, ValueError):
        traceback.print_exc()


def _waiting_child(ctl, root, want, entered, took):
    """The waiting child of an entered box, the box's init's child: waits for the path of the
    kernel's spec on ctl (EOF: the template is gone, and so is the need), reads it and opens the
    kernel's log through the host's root, checks the spec names this box, says so on took (the
    first child then answers) and becomes the kernel. Never returns."""
    code = 3
    try:
        _raise_oom_score(want.get("oom_score_adj"))
        got = b""
        while True:
            b = os.read(ctl, 4096)
            if not b:
                break
            got += b
        path = got.decode().strip()
        if path:
            fd = os.open(path.lstrip("/"), os.O_RDONLY | os.O_CLOEXEC, dir_fd=root)
            with open(fd, "rb") as f:
                spec = json.loads(f.read())
            os.unlink(path.lstrip("/"), dir_fd=root)
            if spec["box"]["holder"] != want["holder"] or spec["box"]["uid"] != want["uid"]:
                raise RuntimeError("the kernel's spec names another box")
            log = os.open(spec["log"].lstrip("/"), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600,
                          dir_fd=root)
            os.write(took, b"k")  # ctl, root and took are closed with the rest (_boxed_kernel)
            _boxed_kernel(spec, entered, log)
        code = 0
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        os._exit(code)


def _fork_entered(req):
    """Makes the kernel in a box entered ahead: hands its waiting child the spec and reads the first
    child's answers ("entered", then "init PID"); answers the kernel's pid as _fork_boxed does."""
    e = _entered.pop(req["entered"], None)
    # "unused": no kernel was asked of the box: the caller may fork into it the usual way.
    if e is None:
        return {"id": req.get("id"), "unused": True, "error": "entered fork: the box entered as %d is gone" % req["entered"]}
    try:
        if e["holder"] != req["holder"]:
            return {"id": req.get("id"), "unused": True,
                    "error": "entered fork: box %d was entered for holder %d" % (req["entered"], e["holder"])}
        try:
            os.write(e["ctl"], req["spec"].encode() + b"\n")
        except OSError as err:
            return {"id": req.get("id"), "unused": True, "error": "entered fork: the box's waiting child is gone (%s)" % err}
        os.close(e["ctl"])
        e["ctl"] = None
        got = b""
        while got.count(b"\n") < 2 and not got.startswith(b"error"):
            b = os.read(e["ans"], 4096)
            if not b:
                break
            got += b
    finally:
        for fd in (e["ctl"], e["ans"]):
            if fd is not None:
                os.close(fd)
    lines = got.decode(errors="replace").split("\n")
    last = lines[1] if lines[0] == "entered" and len(lines) > 1 else lines[0]
    return _kernel_of(req, last.strip(), "entered fork")


def _boxed_kernel(spec, entered, log):
    """The kernel inside the box: its own session, no privileges, the filter; never returns."""
    code = 1
    try:
        os.setsid()
        _std(log)
        os.closerange(3, 1 << 16)
        _raise_oom_score(spec.get("oom_score_adj"))  # set already when the box was entered ahead
        _become(spec)
        box.drop(spec["box"]["uid"], entered)
        box.check(spec["box"]["uid"], entered)
        box.fresh_paths()
        code = _launch(spec["args"])
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        _exit(code)


def _fork(req, cfg, keep_out):
    """Forks a child for req and answers its pid (or why there is none)."""
    if threading.active_count() != 1:
        return {"id": req.get("id"), "error": "the template has a thread; it must not fork"}
    sys.stdout.flush()
    sys.stderr.flush()
    keep_out = tuple(keep_out) + _entered_fds()
    if req.get("enter"):
        return _enter_box(req, keep_out)
    if req.get("entered"):
        return _fork_entered(req)
    if req.get("boxed"):
        return _fork_boxed(req, cfg, keep_out)
    pid = os.fork()
    if pid == 0:
        _child(req, cfg, keep_out)
    return {"id": req.get("id"), "pid": pid}


def _reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _forget_entered(pid)
        _say({"exit": pid, "status": status})


def main():
    cfg = json.loads(sys.argv[1])
    _warm(cfg.get("pre_import") or [], cfg.get("preload"))
    rd, wr = os.pipe()
    os.set_blocking(rd, False)
    os.set_blocking(wr, False)
    signal.set_wakeup_fd(wr)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stdin = sys.stdin.buffer.raw
    _say({"ready": True, "pid": os.getpid()})
    buf = b""
    while True:
        ready, _, _ = select.select([stdin, rd], [], [])
        if rd in ready:
            try:
                while os.read(rd, 512):
                    pass
            except BlockingIOError:
                pass
            _reap()
        if stdin not in ready:
            continue
        data = os.read(stdin.fileno(), 65536)
        if not data:
            return  # the server closed us: the children are the server's kernels and stay
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                _say(_fork(json.loads(line), cfg, (rd, wr)))
                _reap()


if __name__ == "__main__":
    main()
