"""Cell analysis: which global names a turn's cells (and the session functions they call) may read or
write. Overestimating is safe (a name is re-pickled for nothing); underestimating is covered by the
re-check of small groups and by treating exec/eval/star-imports/some magics as "dynamic"."""

import ast
import re
import types

from .common import _DYNAMIC_CALLS, _DYNAMIC_MAGICS


class _CellNames(ast.NodeVisitor):
    """Collects the global names a cell may touch. Names local to functions (args, assignments) are
    excluded unless declared global; names used inside function bodies that are not local are included
    because the function may be called in the same cell."""

    def __init__(self):
        self.names = set()
        self.dynamic = False

    # module scope
    def visit_Name(self, node):
        self.names.add(node.id)

    def visit_Import(self, node):
        for a in node.names:
            self.names.add(a.asname or a.name.split(".")[0])

    def visit_ImportFrom(self, node):
        for a in node.names:
            if a.name == "*":
                self.dynamic = True
            else:
                self.names.add(a.asname or a.name)

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Name) and f.id in _DYNAMIC_CALLS:
            self.dynamic = True
        if isinstance(f, ast.Attribute) and f.attr in ("run_line_magic", "run_cell_magic", "magic"):
            self._magic(node)
        self.generic_visit(node)

    def _magic(self, node):
        args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not args:
            self.dynamic = True
            return
        name = args[0].split()[0].lstrip("%") if args[0].strip() else ""
        if name in _DYNAMIC_MAGICS:
            self.dynamic = True
            return
        for text in args[1:]:
            for piece in (text, " ".join(w for w in text.split() if not w.startswith("-"))):
                try:
                    self.visit(ast.parse(piece))
                    break
                except SyntaxError:
                    continue
            for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
                self.names.add(w)  # e.g. %%capture out, %time x = f(y): overestimating is safe

    def visit_FunctionDef(self, node):
        self.names.add(node.name)
        for d in node.decorator_list:
            self.visit(d)
        self._args_defaults(node.args)
        self._scope(node.args, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self._args_defaults(node.args)
        self._scope(node.args, [node.body])

    def visit_ClassDef(self, node):
        self.names.add(node.name)
        for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(d)
        inner = _CellNames()
        for stmt in node.body:
            inner.visit(stmt)
        local = _stored(node.body)
        self.names |= inner.names - local
        self.dynamic |= inner.dynamic

    def _args_defaults(self, args):
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)

    def _scope(self, args, body):
        inner = _CellNames()
        for stmt in body:
            inner.visit(stmt)
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        if args.vararg:
            params.add(args.vararg.arg)
        if args.kwarg:
            params.add(args.kwarg.arg)
        declared = _declared_global(body)
        local = (_stored(body) | params) - declared
        self.names |= (inner.names - local) | declared
        self.dynamic |= inner.dynamic

    def _comp(self, node):
        inner = _CellNames()
        for g in node.generators:
            inner.visit(g.iter)
            for c in g.ifs:
                inner.visit(c)
        for part in ("elt", "key", "value"):
            if getattr(node, part, None) is not None:
                inner.visit(getattr(node, part))
        targets = set()
        for g in node.generators:
            targets |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.names |= inner.names - targets
        self.dynamic |= inner.dynamic

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp


def _stored(body):
    """Names assigned in a function/class body (its locals), not descending into nested scopes."""
    out = set()
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out.add(a.asname or a.name.split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _declared_global(body):
    out = set()
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Global):
                out.update(n.names)
    return out


def _code_names(code, seen):
    """co_names of a code object and the code objects nested in it: the globals a function may use."""
    out = set()
    stack = [code]
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


# ---------------------------------------------------------------------------------------------------
# Pickling helpers


def _codes_of(v):
    """Code objects whose globals v may use when called: a session function, a session class's
    methods, a session object's class methods, bound methods."""
    if v is None:
        return []
    if isinstance(v, types.MethodType):
        v = v.__func__
    if isinstance(v, types.FunctionType):
        return [v.__code__] if v.__module__ == "__main__" else []
    cls = v if isinstance(v, type) else type(v)
    if getattr(cls, "__module__", None) != "__main__":
        return []
    out = []
    for klass in cls.__mro__:
        if getattr(klass, "__module__", None) != "__main__":
            continue
        for attr in vars(klass).values():
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if isinstance(attr, property):
                out.extend(f.__code__ for f in (attr.fget, attr.fset, attr.fdel) if isinstance(f, types.FunctionType))
            elif isinstance(attr, types.FunctionType):
                out.append(attr.__code__)
    return out


def analyze(shell, cells, cur, parsed=None):
    """(names the cells may touch, whether any cell is dynamic): the cells through IPython's
    transform (magics become calls; parsed: raw cell -> its transform as the shell ran it, when
    known), then the globals of session functions they may call."""
    names = set()
    dynamic = False
    for raw in cells:
        try:
            src = parsed.get(raw) if parsed else None
            tree = ast.parse(shell.transform_cell(raw) if src is None else src)
        except Exception:
            try:
                tree = ast.parse(raw)
            except Exception:
                dynamic = True
                continue
        v = _CellNames()
        v.visit(tree)
        names |= v.names
        dynamic |= v.dynamic
    # Globals used by session functions the cells called (or methods of session objects they touched).
    seen_code = set()
    seen = set()
    todo = [n for n in names if n in cur]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        more = set()
        for code in _codes_of(cur.get(n)):
            more |= _code_names(code, seen_code)
        names |= more
        todo.extend(m for m in more if m in cur and m not in seen)
    return names, dynamic

