"""Library settings: the global state a notebook gives its libraries through their API (display options,
print precision, a style, log levels, warning filters, ...). Each setting is one "state" group named
"@<library>.<what>", saved only while it differs from the library's defaults, restored before the
user's names (a value's repr or a figure may depend on it), and put back to the defaults by a restore
of a checkpoint that does not hold it (a checkpoint restore into a kernel that changed it since).

Cheap when unchanged: a setting is read only from a library already imported (never imported to be
checked); what it reads is plain data compared with the last capture (snapshot._same), so an unchanged
setting reuses its last pickle and writes nothing. What a setting cannot carry (a log handler writing
to a socket, a formatter function that does not pickle) is named in the checkpoint's skipped, as
"@<setting>", with the reason, and the rest of it is carried.

A setting is a module-level ``Setting``: ``capture(skipped)`` answers the value to save or None (at
the defaults), ``apply(value)`` puts it back, ``reset()`` goes back to the defaults. ``early`` settings
(sys.path) are applied before the checkpoint's imports, the others after its imports and definitions,
before its data."""

import sys

from . import widgetstate
from .common import _reason


class Setting:
    __slots__ = ("name", "module", "capture", "apply", "reset", "early", "tag")

    def __init__(self, name, module, capture, apply, reset, early=False, tag=None):
        self.name, self.module, self.capture, self.apply, self.reset = name, module, capture, apply, reset
        self.early = early
        self.tag = tag  # a cheap word that changes whenever the setting may have: the capture is reused


def _dict_tag_reader():
    """A reader of a dict's version tag (CPython 3.11 and 3.12 give a dict a new one at every change:
    nested.py relies on the same), checked on a live dict; None elsewhere (every capture is then a
    full one)."""
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 12):
        return None
    import ctypes

    def tag(d):
        return ctypes.c_uint64.from_address(id(d) + 24).value

    d = {}
    seen = [tag(d)]
    for op in (lambda: d.__setitem__("k", 1), lambda: d.__setitem__("k", 2), lambda: d.pop("k"),
               lambda: d.update(k=3), lambda: d.clear()):
        op()
        seen.append(tag(d))
    return tag if len(set(seen)) == len(seen) else None


_dict_tag = _dict_tag_reader()


# What the kernel had before any cell ran (install): sys.path, the recursion limit, loggers, filters.
_BASE = {}


def base():
    return _BASE


def baseline(prev=None):
    """Notes the kernel's own state at agent install, before any user code: what sys.path, the
    recursion limit, the loggers and the warning filters are compared with (prev: the baseline of
    the agent this one replaces)."""
    import logging
    import warnings

    if prev:
        _BASE.update(prev)
        return

    _BASE["path"] = tuple(sys.path)
    _BASE["recursion"] = sys.getrecursionlimit()
    _BASE["filters"] = tuple(warnings.filters)
    _BASE["loggers"] = {n: _logger_key(lg) for n, lg in _loggers(logging)}


# --- sys ---------------------------------------------------------------------------------------------

def _sys_capture(skipped):
    out = {}
    if tuple(sys.path) != _BASE.get("path", ()):
        out["path"] = (tuple(sys.path), _BASE.get("path", ()))
    if sys.getrecursionlimit() != _BASE.get("recursion", sys.getrecursionlimit()):
        out["recursion"] = sys.getrecursionlimit()
    return out or None


def _sys_apply(v):
    """Makes sys.path and the recursion limit the saved ones; what the group does not hold was at
    the kernel's own then."""
    _sys_reset()
    if "path" in v:
        saved, saved_base = v["path"]
        here = _BASE.get("path", ())
        # The saved kernel's own entries that this kernel lacks (another interpreter) are left out;
        # this kernel's own entries stay in.
        path = [p for p in saved if p not in saved_base or p in here]
        path += [p for p in here if p not in path]
        sys.path[:] = path
    if "recursion" in v:
        sys.setrecursionlimit(v["recursion"])


def _sys_reset():
    if "path" in _BASE:
        sys.path[:] = list(_BASE["path"])
    if "recursion" in _BASE:
        sys.setrecursionlimit(_BASE["recursion"])


# --- pandas ------------------------------------------------------------------------------------------

def _pd_config():
    return sys.modules["pandas._config.config"]


def _pd_tag():
    out = []
    todo = [_pd_config()._global_config]
    while todo:
        d = todo.pop()
        out.append(_dict_tag(d))
        todo.extend(v for v in d.values() if type(v) is dict)
    return tuple(out)


def _pd_capture(skipped):
    cfg = _pd_config()
    out = {}
    for key, opt in cfg._registered_options.items():
        cur = cfg._global_config
        try:
            for part in key.split("."):
                cur = cur[part]
        except (KeyError, TypeError):
            continue  # registered, not set (a deprecated option's remains)
        if cur is not opt.defval and _differs(cur, opt.defval):
            out[key] = cur
    return dict(sorted(out.items())) or None


def _pd_apply(v):
    import warnings

    pd = sys.modules["pandas"]
    _pd_reset(keep=v)
    bad = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated options warn on every set
        for k, x in v.items():
            try:
                pd.set_option(k, x)
            except Exception as e:
                bad.append("%s: %s" % (k, _reason(e)))
    if bad:
        raise ValueError("pandas options not restored: " + "; ".join(bad))


def _pd_reset(keep=()):
    import warnings

    cur = _pd_capture(None) or {}
    cfg = _pd_config()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in cur:
            if k not in keep:
                sys.modules["pandas"].set_option(k, cfg._registered_options[k].defval)


# --- numpy -------------------------------------------------------------------------------------------

_NP_PRINT = {"edgeitems": 3, "threshold": 1000, "floatmode": "maxprec", "precision": 8, "suppress": False,
             "linewidth": 75, "nanstr": "nan", "infstr": "inf", "sign": "-", "formatter": None, "legacy": False}
_NP_ERR = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}


def _np_print_capture(skipped):
    got = sys.modules["numpy"].get_printoptions()
    out = {k: v for k, v in got.items() if k in _NP_PRINT and _differs(v, _NP_PRINT[k])}
    return dict(sorted(out.items())) or None


def _np_print_apply(v):
    np = sys.modules["numpy"]
    np.set_printoptions(**dict(_NP_PRINT, **v))


def _np_print_reset():
    sys.modules["numpy"].set_printoptions(**_NP_PRINT)


def _np_err_capture(skipped):
    np = sys.modules["numpy"]
    out = {k: v for k, v in np.geterr().items() if _NP_ERR.get(k) != v}
    call = np.geterrcall()
    if call is not None:
        out["call"] = call
    return dict(sorted(out.items())) or None


def _np_err_apply(v):
    np = sys.modules["numpy"]
    v = dict(v)
    np.seterrcall(v.pop("call", None))
    np.seterr(**dict(_NP_ERR, **v))


def _np_err_reset():
    _np_err_apply({})


# --- matplotlib --------------------------------------------------------------------------------------

_RC_LISTS = []  # the rcParams whose values are lists: changed in place, their dict's tag stays


def _rc_tag():
    rc = sys.modules["matplotlib"].rcParams
    if not _RC_LISTS:
        _RC_LISTS[:] = [k for k, v in dict.items(rc) if type(v) is list] or [None]
    get = dict.get
    return (_dict_tag(rc),) + tuple(tuple(v) if type(v) is list else v for v in (get(rc, k) for k in _RC_LISTS))


def _rc_capture(skipped):
    """rcParams (a style too) that differ from matplotlib's own (rcParamsOrig), read with dict's own
    methods (no validation); the backend is the kernel's, never saved."""
    mpl = sys.modules["matplotlib"]
    if not hasattr(mpl, "rcParamsOrig"):
        return None
    orig, get, missing = mpl.rcParamsOrig, dict.get, _MISSING
    diff = {}
    for k, v in dict.items(mpl.rcParams):
        o = get(orig, k, missing)
        if v is not o and k != "backend" and (o is missing or _differs(v, o)):
            diff[k] = list(v) if type(v) is list else v  # a copy: a list changed in place is seen
    return dict(sorted(diff.items())) or None


def _rc_apply(v, reset=True):
    import warnings

    mpl = sys.modules.get("matplotlib") or __import__("matplotlib")
    if reset:
        _rc_reset(keep=v)
    bad = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, x in v.items():
            try:
                mpl.rcParams[k] = x
            except Exception as e:
                bad.append("%s: %s" % (k, _reason(e)))
    if bad:
        raise ValueError("rcParams not restored: " + "; ".join(bad))


def _rc_reset(keep=()):
    import warnings

    mpl = sys.modules["matplotlib"]
    cur = _rc_capture(None) or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in cur:
            if k not in keep and k in mpl.rcParamsOrig:
                try:
                    mpl.rcParams[k] = dict.__getitem__(mpl.rcParamsOrig, k)
                except Exception:
                    pass


# --- decimal, warnings -------------------------------------------------------------------------------

def _dec_key(ctx):
    return (ctx.prec, ctx.rounding, ctx.Emin, ctx.Emax, ctx.capitals, ctx.clamp,
            tuple(sorted(t.__name__ for t, on in ctx.traps.items() if on)),
            tuple(sorted(t.__name__ for t, on in ctx.flags.items() if on)))


def _dec_capture(skipped):
    dec = sys.modules["decimal"]
    key = _dec_key(dec.getcontext())
    return key if key != _dec_key(dec.Context()) else None


def _dec_apply(v):
    dec = sys.modules["decimal"]
    ctx = dec.getcontext()
    ctx.prec, ctx.rounding, ctx.Emin, ctx.Emax, ctx.capitals, ctx.clamp = v[:6]
    for field, names in ((ctx.traps, v[6]), (ctx.flags, v[7])):
        for sig in list(field):
            field[sig] = sig.__name__ in names


def _dec_reset():
    _dec_apply(_dec_key(sys.modules["decimal"].Context()))


def _warn_capture(skipped):
    filters = tuple(sys.modules["warnings"].filters)
    return filters if filters != _BASE.get("filters", ()) else None


def _warn_apply(v):
    w = sys.modules["warnings"]
    w.filters[:] = list(v)
    mutated = getattr(w, "_filters_mutated", None) or getattr(w, "_filters_mutated_lock_held", None)
    if mutated is not None:
        mutated()  # the C module caches the list's version


def _warn_reset():
    if "filters" in _BASE:
        _warn_apply(_BASE["filters"])


# --- logging -----------------------------------------------------------------------------------------

def _loggers(logging):
    yield "", logging.root
    for n, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger):
            yield n, lg


_FRESH = (0, True, False, (), ())


def _logger_key(lg):
    return (lg.level, lg.propagate, lg.disabled, tuple(lg.handlers), tuple(lg.filters))


def _log_capture(skipped):
    """The loggers whose level, propagation, handlers or filters differ from what the kernel had
    (or, for a logger made since, from a new logger's): each as (level, propagate, disabled, its
    handlers' specs, filters), the handlers as _handler_spec says."""
    logging = sys.modules["logging"]
    base = _BASE.get("loggers", {})
    out = {}
    for n, lg in _loggers(logging):
        key = _logger_key(lg)
        if key == base.get(n, _FRESH if n else key):
            continue
        specs = []
        for h in key[3]:
            spec = _handler_spec(logging, h, n)
            if isinstance(spec, str):
                if skipped is not None:
                    skipped["@logging"] = {"name": "@logging", "type": "state", "reason": "not carried: the %s of "
                                           "logger %r: %s" % (type(h).__name__, n or "root", spec)}
                continue
            specs.append(spec)
        out[n] = key[:3] + (tuple(specs), key[4])
    disable = logging.root.manager.disable
    if disable:
        out["@disable"] = disable
    return out or None


def _handler_spec(logging, h, logger):
    """How to build handler h again: ("stream", which of sys's streams, level, formatter, filters),
    ("file", class, path, mode, encoding, level, formatter, filters), ("null", level, formatter,
    filters); ("library", module, class) for a handler of a library's own class on that library's
    logger (astropy's), which the library's import makes again; or a str saying why it cannot be
    carried."""
    cls = type(h)
    top = logger.split(".")[0]
    if cls.__module__.split(".")[0] == top and top in sys.modules and top != "logging":
        return ("library", cls.__module__, cls.__qualname__)
    rest = (h.level, h.formatter, tuple(h.filters))
    if type(h) is logging.StreamHandler:
        for which in ("stdout", "stderr", "__stdout__", "__stderr__"):
            if h.stream is getattr(sys, which, None):
                return ("stream", which) + rest
        return "it writes to a stream that is not one of sys's"
    if isinstance(h, logging.FileHandler):
        return ("file", type(h), h.baseFilename, "a", h.encoding) + rest
    if type(h) is logging.NullHandler:
        return ("null",) + rest
    return "handlers of type %s are not carried" % type(h).__name__


def _build_handler(logging, spec):
    kind = spec[0]
    if kind == "stream":
        h, rest = logging.StreamHandler(getattr(sys, spec[1])), spec[2:]
    elif kind == "file":
        h, rest = spec[1](spec[2], mode=spec[3], encoding=spec[4]), spec[5:]
    else:
        h, rest = logging.NullHandler(), spec[1:]
    h.setLevel(rest[0])
    if rest[1] is not None:
        h.setFormatter(rest[1])
    for f in rest[2]:
        h.addFilter(f)
    return h


def _log_apply(v):
    logging = sys.modules.get("logging") or __import__("logging")
    _log_reset(keep=v)
    for n, spec in v.items():
        if n == "@disable":
            logging.disable(spec)
            continue
        lg = logging.getLogger(n or None)
        lg.setLevel(spec[0])
        lg.propagate, lg.disabled = spec[1], spec[2]
        lib = {hs[1:] for hs in spec[3] if hs[0] == "library"}
        for h in list(lg.handlers):
            if (type(h).__module__, type(h).__qualname__) not in lib:  # the library made those again
                lg.removeHandler(h)
        for hs in spec[3]:
            if hs[0] != "library":
                lg.addHandler(_build_handler(logging, hs))
        lg.filters[:] = list(spec[4])


def _log_reset(keep=()):
    logging = sys.modules["logging"]
    base = _BASE.get("loggers", {})
    for n, lg in _loggers(logging):
        if n in keep:
            continue
        key = _logger_key(lg)
        want = base.get(n, _FRESH if n else key)
        if key == want:
            continue
        lg.setLevel(want[0])
        lg.propagate, lg.disabled = want[1], want[2]
        lg.handlers[:] = list(want[3])
        lg.filters[:] = list(want[4])
    if "@disable" not in keep:
        logging.disable(logging.NOTSET)


# --- torch, scikit-learn -----------------------------------------------------------------------------

_TORCH_PRINT = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def _torch_capture(skipped):
    torch = sys.modules["torch"]
    if not hasattr(torch, "get_default_dtype"):
        return None
    out = {"threads": torch.get_num_threads()}  # the default is the machine's: always carried
    if torch.get_default_dtype() is not torch.float32:
        out["dtype"] = str(torch.get_default_dtype()).replace("torch.", "")
    if torch.are_deterministic_algorithms_enabled():
        out["deterministic"] = bool(getattr(torch, "is_deterministic_algorithms_warn_only_enabled", bool)())
    if not torch.is_grad_enabled():
        out["grad"] = False
    cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
    for k in ("deterministic", "benchmark"):
        if cudnn is not None and getattr(cudnn, k, False):
            out["cudnn." + k] = True
    if hasattr(torch, "get_float32_matmul_precision") and torch.get_float32_matmul_precision() != "highest":
        out["matmul_precision"] = torch.get_float32_matmul_precision()
    opts = getattr(getattr(torch, "_tensor_str", None), "PRINT_OPTS", None)
    p = {k: getattr(opts, k) for k, d in _TORCH_PRINT.items() if opts is not None and getattr(opts, k, d) != d}
    if p:
        out["print"] = tuple(sorted(p.items()))
    return out


def _torch_apply(v):
    torch = sys.modules.get("torch") or __import__("torch")
    torch.set_num_threads(v.get("threads", torch.get_num_threads()))
    torch.set_default_dtype(getattr(torch, v.get("dtype", "float32")))
    if "deterministic" in v:
        torch.use_deterministic_algorithms(True, warn_only=v["deterministic"])
    else:
        torch.use_deterministic_algorithms(False)
    torch.set_grad_enabled(v.get("grad", True))
    cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
    for k in ("deterministic", "benchmark"):
        if cudnn is not None:
            setattr(cudnn, k, v.get("cudnn." + k, False))
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision(v.get("matmul_precision", "highest"))
    torch.set_printoptions(**dict(_TORCH_PRINT, **dict(v.get("print", ()))))


def _torch_reset():
    torch = sys.modules["torch"]
    _torch_apply({"threads": torch.get_num_threads()})


def _sk_defaults():
    return dict(sys.modules["sklearn._config"]._global_config)


def _sk_capture(skipped):
    cur = sys.modules["sklearn"].get_config()
    base = _sk_defaults()
    out = {k: v for k, v in cur.items() if k in base and _differs(v, base[k])}
    return dict(sorted(out.items())) or None


def _sk_apply(v):
    sk = sys.modules.get("sklearn") or __import__("sklearn")
    sk.set_config(**dict(_sk_defaults(), **v))


def _sk_reset():
    _sk_apply({})


# -------------------------------------------------------------------------------------------------------

class _Missing:
    pass


_MISSING = _Missing()


def _differs(a, b):
    try:
        return bool(a != b)
    except Exception:
        return True


SETTINGS = (
    Setting("@sys", "sys", _sys_capture, _sys_apply, _sys_reset, early=True),
    Setting("@pandas.options", "pandas._config.config", _pd_capture, _pd_apply, _pd_reset,
            tag=_dict_tag and _pd_tag),
    Setting("@numpy.printoptions", "numpy", _np_print_capture, _np_print_apply, _np_print_reset),
    Setting("@numpy.seterr", "numpy", _np_err_capture, _np_err_apply, _np_err_reset),
    Setting("@matplotlib.rcParams", "matplotlib", _rc_capture, _rc_apply, _rc_reset, tag=_dict_tag and _rc_tag),
    Setting("@decimal.context", "decimal", _dec_capture, _dec_apply, _dec_reset),
    Setting("@warnings.filters", "warnings", _warn_capture, _warn_apply, _warn_reset),
    Setting("@logging", "logging", _log_capture, _log_apply, _log_reset),
    Setting("@torch.settings", "torch", _torch_capture, _torch_apply, _torch_reset),
    Setting("@sklearn.config", "sklearn._config", _sk_capture, _sk_apply, _sk_reset),
    # Not a setting, but restored where settings are: after definitions, before the data holding widgets.
    Setting(widgetstate.NAME, "ipywidgets", widgetstate.capture, widgetstate.apply, widgetstate.reset),
)
BY_NAME = {s.name: s for s in SETTINGS}


def capture(skipped):
    """[(name, value)] of the settings that differ from their defaults, of the libraries imported.
    A setting that cannot be read is named in skipped."""
    out = []
    mods = sys.modules
    for s in SETTINGS:
        if s.module not in mods:
            continue
        try:
            v = _capture_one(s, skipped)
        except Exception as e:
            skipped[s.name] = {"name": s.name, "type": "state", "reason": "not saved: %s" % _reason(e)}
            continue
        if v is not None:
            out.append((s.name, v))
    return out


_TAGGED = {}  # setting name -> (its tag, the value captured then)


def _capture_one(s, skipped):
    """The setting's value: the last capture's very object while its tag is unchanged (so the
    snapshot reuses its pickle by identity), else a new capture."""
    if s.tag is None:
        return s.capture(skipped)
    t = s.tag()
    hit = _TAGGED.get(s.name)
    if hit is not None and hit[0] == t:
        return hit[1]
    v = s.capture(skipped)
    _TAGGED[s.name] = (t, v)
    return v


def reset_absent(present):
    """Puts back to its defaults each setting of an imported library that the checkpoint restored
    does not hold (it was at its defaults then). [(name, reason)] of those that failed."""
    failed = []
    for s in SETTINGS:
        if s.name in present or s.module not in sys.modules:
            continue
        try:
            if s.capture(None) is not None:
                s.reset()
        except Exception as e:
            failed.append((s.name, "not reset to its defaults: %s" % _reason(e)))
    return failed
