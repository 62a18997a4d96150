"""carryover snapshot agent: lives inside each IPython kernel and turns its namespace into chunks.

Loaded by the Go server (persistence.AgentBootstrap) as the package ``carryover_agent`` and bound in the
user namespace as ``__carryover__`` (the only name it adds). Only stdlib, dill, xxhash and zstandard.

Modules, by concern: each says what it holds in its docstring, and docs/persistence.md ("The agent
package") lists them all (a Go test checks that list against the package).

Compatibility: checkpoints written while the agent was the single module ``carryover_agent`` name its
rebuild functions (``carryover_agent._reopen_file``, ``_bytes_from``, ...) in their pickles. They are
re-exported here with ``__module__`` set to "carryover_agent", so those checkpoints load and new
pickles of the same values are byte-identical (their chunks are already in the store).

Why it looks like this
----------------------
* Saving the whole namespace after every turn is too slow (a 1 GiB array costs seconds), so the agent
  works out what a turn could have changed: names created, deleted or rebound (dict keys + id()), names the
  turn's cells read or write (their AST), global names used by session functions the cells called
  (co_names, transitively), and every small group (re-pickled each turn within a time budget, which
  catches mutations through aliases the AST cannot see). Everything else reuses its previous reference.
* Variables that share objects form ONE group pickled together (the pickler memo keeps ``b is a``).
* Pickle protocol 5 with the C pickler; contiguous buffers (numpy arrays, large top-level bytes) go
  out-of-band, cut into chunks hashed with xxh3-128, so an unchanged 1 GiB array writes nothing and a
  modified one writes only its changed chunks. dill is the fallback for what pickle cannot do; classes
  and functions defined in the session are pickled by value (classes through a skeleton + state, which
  also works for Enum and ABC), and restored before the data that refers to them as ``__main__.Name``.
* Modules and objects imported from modules are recorded by reference and re-imported; an object a
  module owns (``from scipy.stats import norm``) comes back as that module's attribute (owners.py).
* What restores differently is restored faithfully or named (checkpoint "skipped"): interpreter state
  that is no variable (global random generators, rcParams, session magics) travels as "state" groups;
  library reducers keep views as views, dtypes as numpy's singletons, tensors' .grad, memmaps on their
  files, and refuse tensors inside an autograd graph; small changed groups are unpickled and compared
  with the live values ("saved, but ..." when a custom __reduce__ loses something).
* Large numpy buffers are diffed by dirty-page tracking (userfaultfd WP_ASYNC + PAGEMAP_SCAN, see
  _Tracker): only chunks with written pages are hashed again; elsewhere every chunk is hashed.
* Large lists and dicts of atoms and records (a million small dicts, parsed JSON nested to any
  bounded depth) are pickled in slices, one out-of-band buffer each (``_rebuild_sliced``); changed
  slices are found from the items' addresses, dict version tags and the fingerprints of nested
  lists, dicts and sets read from memory, so one changed record re-pickles one slice
  (containers/sliced.py, containers/nested.py); a small dict holding such a container has it sliced
  (containers/holders.py).

Spool protocol (the Go side is persistence/checkpoint_spool.go)
-------------------------------------------------------------
Go calls, silently, ``__carryover__.call(<op>, <json args>)`` and reads the answer as the text/plain of
the user expression ``__carryover__.take()`` (a str whose repr is the raw JSON).

``snapshot`` args {"token", "committed", "chunk_size"}:
  * ``committed`` is the token of the last snapshot Go committed. The agent keeps the state of its last
    snapshot as *pending* until Go says (in the next call) that it was committed; otherwise it is dropped
    and its cells are analysed again, so a failed commit never leaves the agent believing Go has chunks.
  * New chunks (content Go does not have: not referenced by the committed state) are written as files
    ``<spool>/<token>/<hash>`` holding the STORED bytes (zstd-compressed when that pays), or inlined as
    base64 in the answer when small. Go streams each file into the store and deletes the directory.
  * A group descriptor chunk (JSON, below) names a group's pickle and buffer chunks; the manifest refers
    to a group by that one hash, and the descriptor's chunk entry lists them as children for GC.
  * Answer: {"token", "groups": [{"k": "imp"|"def"|"data"|"state", "n": [names], "t": [types], "r": hash,
    "m": module, "a": attr}], "saved": [names], "unchanged": N, "skipped": [{"name","type","reason"}],
    "chunks": [{"h", "c": "raw"|"zstd", "n": raw len, "s": stored len, "f": file | "d": base64,
    "ch": [children]}], "cwd", "env": {"set": {}, "unset": []}, "timings": {detect_ms, serialize_ms,
    write_ms, dirty_mode: "uffd"|"hash"|"mixed"|"", dirty_fallback, tracked_bytes, rehashed_bytes,
    hashed_bytes, sliced_bytes, sliced_repickled_bytes, unsliced: [{"name","type","reason"}]}}.
    "state" groups are named "@random", "@numpy.random", "@torch.random", "@magics", "@extensions"
    and, for the libraries' settings (libstate.py), "@sys", "@pandas.options", "@matplotlib.rcParams",
    ...: not variables (never in "saved"); the settings are restored before the data, the rest after.
    A "data" group whose every name is bound to a module's object has "o": {name: "module:attribute"}
    (owners.py).
Group descriptor (canonical JSON): {"v": 1, "k": kind, "n": [names], "f": "p" (pickle) | "d" (dill),
  "p": [[hash, len], ...] (the pickle stream), "b": [[readonly, len, [[hash, len], ...]], ...]
  (out-of-band buffers in pickle order), "d": [names of session classes/functions it needs first]}.
  A buffer of more than INDEX_FANOUT (64) chunks is [readonly, len, [], [[index hash, bytes], ...]]
  instead: each index chunk holds the JSON [[hash, len], ...] of up to 64 of its chunks (and lists
  them as its children), so a turn that writes one chunk rewrites one index chunk, not the whole
  list. A group of more than 64 buffers (a container in slices) has "b": [] and "bx": [[index hash,
  bytes], ...], each index chunk the JSON list of up to 64 buffer entries. Go expands index chunks
  before it hands a descriptor to ``restore`` (which sees flat lists).

``restore`` args {"args_file": path}: the arguments below, as JSON in a spool file (Go writes them there: sent
  inline, their megabytes went through IPython's transformers and compiler as a string literal);
  args {"clear", "groups": [{"k", "n", "r", "m", "a", "desc", "pf" | "pd", "bf": [files],
  "bp": [{"j", "f", "o"}]}], "cwd", "env", "skipped"} ("skipped": the checkpoint's, so "saved, but
  ..." entries stay named): Go assembles each group's pickle stream into file ``pf`` (or inlines it
  as base64 ``pd``) and each out-of-band buffer into one file of ``bf``, a large one into several
  (the first, of the buffer's whole size, in ``bf``; buffer ``j``'s part from offset ``o`` in file
  ``f`` of ``bp``); the agent maps buffers copy-on-write (mmap ACCESS_COPY: no copy until written),
  each part over its place, unlinks the files and loads each group independently.
  Answer: {"restored": [names], "failed": [{"name","type","reason"}], "cwd", "timings": {load_ms},
  "groups": [{"n": [names], "ms"}]}.

``preimport`` args {"modules": [names]}: import them (into sys.modules) now, answering {"modules": loaded,
"missing": [names], "ms"}; the server calls it on kernels bound for its warm pool.

``forget``: drop the agent's state so the next snapshot serialises everything again.
"""

from .agent import Agent, JSONText, install, template_child_io, template_warm  # noqa: F401
from .analysis import _CellNames, _code_names, _codes_of, analyze  # noqa: F401
from .classes import _class_setstate, _class_skeleton, _enum_skeleton, _reduce_class, _sentinels  # noqa: F401
from .common import (  # noqa: F401
    BIG_BYTES, BIG_GRAPH, DEFAULT_CHUNK, INLINE_MAX, PROTOCOL, RECHECK_BUDGET, SAMPLE, SMALL_GROUP, _hash,
    _shared_types)
from .dirty import _NR_USERFAULTFD, TRACK_MIN, TRACKED_CHUNK, _hash_all, _Tracker  # noqa: F401
from .interp import _apply_state, _capture_state  # noqa: F401
from .pickling import _DataPickler, _import_ref, _persistent_load, pickle_data, pickle_def, pickle_one  # noqa: F401
from .reducers import (  # noqa: F401
    _DISPATCH, _OOBBytes, _array_from_buffer, _bytes_from, _library_dispatch, _make_view, _reopen_file, _reopen_memmap,
    _tensor_with_grad, _torch_generator)
from .containers.objarrays import _object_array  # noqa: F401
from .owners import _module_attr  # noqa: F401
from .containers.sliced import SLICE_MIN, _rebuild_sliced  # noqa: F401
from .containers import holders, nested  # noqa: F401,E402
from .verify import _verify  # noqa: F401
from .widgetstate import _widget_ref  # noqa: F401

# What pickles reference by name: kept at the module path they had when the agent was one module.
PICKLED_BY_NAME = (_bytes_from, _reopen_file, _array_from_buffer, _reopen_memmap, _make_view, _tensor_with_grad,
                   _torch_generator, _class_skeleton, _enum_skeleton, _class_setstate, _rebuild_sliced,
                   _object_array, _module_attr, _widget_ref)
for _f in PICKLED_BY_NAME:
    _f.__module__ = __name__
del _f
