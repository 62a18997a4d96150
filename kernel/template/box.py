"""carryover kernel template, boxed forks: what a forked kernel does to become a sandboxed one.

Imported by carryover_template.py (template.py). Each step is what bubblewrap, prlimit and setpriv
do for a cold kernel (kernel/sandbox/argv.go), done to a process that was forked rather than
exec'd, and each is checked afterwards (check) in /proc/self/status, which is the kernel's own view:

- enter (in the first child, root, still in the host's pid namespace): join the box's cgroups,
  take the holder's rlimits (prlimit's), and setns() into all of the holder's namespaces through a
  pidfd, which is checked to be the holder (its start time) before it is used;
- drop (in the kernel, inside the box): empty the bounding set and the ambient set, clear the
  supplementary groups, become the box's uid and gid (which empties the permitted and effective
  sets), empty the inheritable set, set dumpable back (an exec would have: /proc/self stays the
  kernel's own), no_new_privs, and load the seccomp program the server built (the same file
  bubblewrap loads for a cold kernel).
"""

import ctypes
import os
import resource
import site
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID

PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


def _call(name, *args):
    """Calls a libc function; OSError on -1."""
    fn = getattr(_libc, name)
    if fn(*args) == -1:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (name, os.strerror(e)))


def _prctl(option, arg2=0):
    _call("prctl", ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0),
          ctypes.c_ulong(0))


def _start_time(pid):
    with open("/proc/%d/stat" % pid, "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[19])


# /proc/PID/limits names -> resources (prlimit(2) of another uid's process needs CAP_SYS_RESOURCE).
_LIMITS = {"Max cpu time": "CPU", "Max file size": "FSIZE", "Max data size": "DATA", "Max stack size": "STACK",
           "Max core file size": "CORE", "Max resident set": "RSS", "Max processes": "NPROC",
           "Max open files": "NOFILE", "Max locked memory": "MEMLOCK", "Max address space": "AS",
           "Max pending signals": "SIGPENDING", "Max msgqueue size": "MSGQUEUE", "Max nice priority": "NICE",
           "Max realtime priority": "RTPRIO", "Max realtime timeout": "RTTIME"}


def _limits(pid):
    """pid's rlimits, from /proc/PID/limits: {resource: (soft, hard)}; all of _LIMITS or an error."""
    out = {}
    with open("/proc/%d/limits" % pid) as f:
        for line in f.read().splitlines()[1:]:
            for label, name in _LIMITS.items():
                if line.startswith(label + " "):
                    vals = line[len(label):].split()[:2]
                    out[getattr(resource, "RLIMIT_" + name)] = tuple(
                        resource.RLIM_INFINITY if v == "unlimited" else int(v) for v in vals)
    if len(out) != len(_LIMITS):
        raise RuntimeError("rlimits of %d: %d of %d read" % (pid, len(out), len(_LIMITS)))
    return out


def enter(box):
    """Puts this process in the box's cgroups, rlimits and namespaces (its children are born in the
    box's pid namespace). Answers what the kernel needs later, read while the host is in view."""
    holder = box["holder"]
    fd = os.pidfd_open(holder)
    try:
        # The pidfd names whatever had the pid when it was opened: the holder iff it still has the
        # start time the server saw (a process that took over the pid would have another).
        if _start_time(holder) != box["start"]:
            raise RuntimeError("the box's holder %d is gone" % holder)
        with open("/proc/%d/stat" % holder, "rb") as f:
            init = int(f.read().rsplit(b")", 1)[1].split()[1])  # bubblewrap's init, in the box
        if os.stat("/proc/%d/ns/user" % holder).st_ino != os.stat("/proc/self/ns/user").st_ino:
            raise RuntimeError("the box is in another user namespace")
        prog = b""
        if box.get("seccomp"):
            with open(box["seccomp"], "rb") as f:
                prog = f.read()
            if not prog or len(prog) % 8:
                raise RuntimeError("bad seccomp program %s" % box["seccomp"])
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last_cap = int(f.read())
        for path in box.get("cgroups") or []:
            with open(path, "w") as f:
                f.write(str(os.getpid()))
        for r, want in _limits(holder).items():
            resource.setrlimit(r, want)
        _call("setns", ctypes.c_int(fd), ctypes.c_int(NAMESPACES))
    finally:
        os.close(fd)
    return {"seccomp": prog, "last_cap": last_cap, "init": init}


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def drop(uid, entered):
    """Drops every privilege, then loads the seccomp program (see the module doc)."""
    for cap in range(entered["last_cap"] + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _call("prctl", ctypes.c_int(PR_CAP_AMBIENT), ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0),
          ctypes.c_ulong(0), ctypes.c_ulong(0))
    os.setgroups([])
    if uid:
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    hdr = _CapHeader(CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _call("capset", ctypes.byref(hdr), data)
    _prctl(PR_SET_DUMPABLE, 1)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    prog = entered["seccomp"]
    if prog:
        buf = ctypes.create_string_buffer(prog, len(prog))
        fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
        _call("prctl", ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
              ctypes.c_ulong(0), ctypes.c_ulong(0))


def check(uid, entered):
    """Fails unless /proc/self/status shows the box's uid, no capability, no_new_privs and the
    filter: the kernel never starts half-sandboxed."""
    with open("/proc/self/status") as f:
        st = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    want = {"Uid": [str(uid)] * 4, "Gid": [str(uid)] * 4, "Groups": [], "NoNewPrivs": ["1"],
            "Seccomp": ["2" if entered["seccomp"] else "0"]}
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        want[cap] = ["0000000000000000"]
    for key, val in want.items():
        if st.get(key, "").split() != val:
            raise RuntimeError("boxed kernel: %s is %r, want %r" % (key, st.get(key), val))
    # /proc is the box's (its pid namespace's): /proc/self names this process only from inside it.
    if os.readlink("/proc/self") != str(os.getpid()):
        raise RuntimeError("boxed kernel: not in the box's pid namespace")


_template_finders = None  # the template's sys.path_importer_cache, kept alive (fresh_paths)


def fresh_paths():
    """Gives the kernel the import path a cold one in the box has, and forgets the template's view
    of the file system where Python cached it. The template is started without the boxes'
    PYTHONPATH (it runs on the host as root: it must never import from a host /workspace or
    /skills), so its entries go first here, where a cold kernel's start puts them; the import
    system's finders are dropped (a dir that did not exist outside the box, such as the package
    prefix in /workspace, was cached as having none) and so are site's user dirs (derived from the
    template's HOME). The template's finder cache is replaced, not cleared: clearing it freed its
    finders and their directory listings (tens of thousands of strings the template made, shared
    copy-on-write), whose reference counts then copied page after page (~10 ms of a forked
    kernel's start); kept unreachable, they stay shared and untouched."""
    global _template_finders
    _template_finders, sys.path_importer_cache = sys.path_importer_cache, {}
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [p for p in extra if p not in sys.path]
    import importlib

    importlib.invalidate_caches()
    site.USER_BASE = None
    site.USER_SITE = None
