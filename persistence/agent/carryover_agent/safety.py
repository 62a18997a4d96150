"""What a past turn's code does, as replay (replay.py) needs it: the global names it binds, the names
it reads before binding them (its inputs), every name it may touch, and whether running it a second
time is safe. Static and conservative: a construct it cannot vouch for makes the turn unsafe, with a
reason the user reads ("writes files", "runs a shell command", ...); over-approximating the names a
turn touches only makes replay refuse more often, never bind something wrong."""

import ast

from .analysis import _CellNames

# Calls that make a turn unsafe to run again, by the attribute or function name called.
_WRITES = frozenset(("to_csv to_parquet to_json to_excel to_pickle to_feather to_hdf to_sql to_stata "
                     "write_text write_bytes savefig save savez savez_compressed savetxt tofile dump "
                     "unlink remove rmdir rmtree rename replace_file mkdir makedirs touch copy copyfile "
                     "copytree move chmod chown symlink link truncate").split())
_SHELL = frozenset("system getoutput popen Popen run call check_call check_output spawnv execv execvp "
                   "fork kill".split())
_NET_MODULES = frozenset("socket requests urllib urllib3 http httpx aiohttp ftplib smtplib paramiko "
                         "websocket websockets".split())
_UNSEEDED = frozenset("urandom uuid1 uuid4 token_bytes token_hex token_urlsafe SystemRandom randbits "
                      "time time_ns now utcnow today perf_counter monotonic".split())
_INPUT = frozenset(("input", "getpass"))
# Modules whose calls draw on pyplot's global figures: a replay would add figures the next cell shows.
_GLOBAL_DRAWING = frozenset(("plt", "pyplot", "sns", "seaborn"))
# Line magics that only configure display or time a statement: safe to run again.
_SAFE_MAGICS = frozenset("matplotlib time timeit config precision pprint".split())


class Turn:
    """The analysis of one turn's code (its cells joined)."""

    def __init__(self, code, shell=None):
        self.unsafe = None
        self.binds = set()
        self.inputs = set()
        self.touched = set()
        try:
            src = shell.transform_cell(code) if shell is not None else code
            tree = ast.parse(src)
        except Exception:
            self.unsafe = "its code does not parse"
            return
        names = _CellNames()
        names.visit(tree)
        self.touched = names.names
        if names.dynamic:
            self.unsafe = "it runs dynamic code (exec, eval, a star import or a magic carryover cannot read)"
            return
        self._scan(tree)
        self._names(tree)

    def _scan(self, tree):
        for node in ast.walk(tree):
            if self.unsafe:
                return
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for m in mods:
                    if m.split(".")[0] in _NET_MODULES:
                        self.unsafe = "it uses the network (imports %s)" % m
                    if m.split(".")[0] in ("subprocess", "shutil"):
                        self.unsafe = "it imports %s (shell commands or file writes)" % m
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                pass

    def _call(self, node):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if owner in _GLOBAL_DRAWING:
            self.unsafe = "it draws with %s (figures held by pyplot, shown by the next cell)" % owner
        elif name == "open":
            self._open(node)
        elif name in ("run_line_magic", "run_cell_magic"):
            magic = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else ""
            if name == "run_cell_magic" or str(magic).split(" ")[0] not in _SAFE_MAGICS:
                self.unsafe = "it runs the magic %%%s" % magic
        elif name in _WRITES:
            self.unsafe = "it writes files (%s)" % name
        elif name in _SHELL:
            self.unsafe = "it runs a shell command (%s)" % name
        elif name in _UNSEEDED:
            self.unsafe = "it reads the clock or unseeded randomness (%s)" % name
        elif name in _INPUT:
            self.unsafe = "it reads input (%s)" % name
        elif name == "default_rng" and not node.args and not node.keywords:
            self.unsafe = "it draws unseeded random numbers (default_rng())"
        elif name == "Generator" and not node.args and isinstance(f, ast.Attribute):
            self.unsafe = "it makes an unseeded generator (Generator())"

    def _open(self, node):
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        if mode is None:
            return  # read-only
        if not isinstance(mode, ast.Constant) or any(c in str(mode.value) for c in "wax+"):
            self.unsafe = "it writes files (open for writing)"

    def _names(self, tree):
        """binds: every global name a statement at module level may bind (or delete). inputs: names a
        statement loads that no earlier unconditional statement of the turn bound: the turn reads
        them from before it ran. A name bound only inside if/for/try is not counted as bound for the
        statements after it (it may not have been)."""
        bound = set()
        for stmt in tree.body:
            loads, stores = _loads_stores(stmt)
            self.inputs |= loads - bound
            self.binds |= stores
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom, ast.FunctionDef,
                                 ast.AsyncFunctionDef, ast.ClassDef)):
                bound |= stores
            if isinstance(stmt, ast.Delete):
                bound -= stores


def _loads_stores(stmt):
    """(names loaded anywhere in stmt, global names it stores or deletes at module level)."""
    loads, stores = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        elif isinstance(node, ast.Global):
            stores.update(node.names)
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        loads.add(stmt.target.id)
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        stores.update(a.asname or a.name.split(".")[0] for a in stmt.names)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        stores.add(stmt.name)
        # Names stored inside a function body are its locals, not globals (unless declared global).
        inner = {a.arg for node in ast.walk(stmt) if isinstance(node, ast.arguments)
                 for a in node.posonlyargs + node.args + node.kwonlyargs + [node.vararg, node.kwarg] if a}
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                inner.add(node.id)
        glob = {n for node in ast.walk(stmt) if isinstance(node, ast.Global) for n in node.names}
        local = inner - glob - {stmt.name}
        stores -= local
        loads -= local  # a local's loads are not the turn's inputs
    # Comprehension variables are local to the comprehension: not bound (their loads stay inputs, an
    # over-approximation that only makes replay refuse more often).
    for node in ast.walk(stmt):
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for gen in node.generators:
                for t in ast.walk(gen.target):
                    if isinstance(t, ast.Name):
                        stores.discard(t.id)
    return loads, stores
