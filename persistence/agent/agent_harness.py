"""Test harness: plays the Go side of the spool protocol (see carryover_agent's docstring) against an
in-process IPython shell, with a directory of chunk files as the store. Used by test_agent.py; each
"kernel" is a new /usr/bin/python3 process whose interpreter has imported IPython and the agent and
none of the user's libraries, so restores start as in a new kernel: a child forked from a zygote
(zygote.py, `agent_harness.py --zygote`) that has imported what this module imports, or a fresh
process when CARRYOVER_AGENT_TEST_FORK=0."""

import base64
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import carryover_agent  # noqa: E402

try:
    import zstandard
except Exception:  # pragma: no cover
    zstandard = None


def new_shell(spool):
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    return sh, carryover_agent.install(spool, sh)


def call(agent, op, args):
    agent.call(op, json.dumps(args))
    return json.loads(agent.take())


def checkpoint(agent, spool, store, token, committed="", chunk_size=1 << 20):
    """Snapshot, move chunks into the store (dir of raw chunk files), return (result, manifest)."""
    r = call(agent, "snapshot", {"token": token, "committed": committed, "chunk_size": chunk_size})
    written = 0
    for c in r["chunks"]:
        if "d" in c:
            data = base64.b64decode(c["d"])
        else:
            with open(os.path.join(spool, token, c["f"]), "rb") as f:
                data = f.read()
        if c["c"] == "zstd":
            data = zstandard.ZstdDecompressor().decompress(data, max_output_size=c["n"])
        assert len(data) == c["n"], (c, len(data))
        dst = os.path.join(store, c["h"])
        if not os.path.exists(dst):
            with open(dst, "wb") as f:
                f.write(data)
            written += c["s"]
    shutil.rmtree(os.path.join(spool, token), ignore_errors=True)
    for g in r["groups"]:  # every ref must be in the store after the put
        if g.get("r"):
            assert os.path.exists(os.path.join(store, g["r"])), g
    manifest = {"groups": r["groups"], "cwd": r["cwd"], "env": r["env"], "skipped": r["skipped"]}
    return r, manifest, written


def expand(store, ref):
    """The group descriptor ref with its index chunks (of its buffer list, of long chunk lists) read
    back inline, as Go's expandDescriptor hands it to the agent."""
    with open(os.path.join(store, ref), "rb") as f:
        desc = json.loads(f.read())
    for h, n in desc.pop("bx", ()):
        with open(os.path.join(store, h), "rb") as f:
            run = json.loads(f.read())
        assert sum(b[1] for b in run) == n, (ref, h)
        desc["b"].extend(run)
    for j, b in enumerate(desc["b"]):
        if len(b) == 4:
            cl = []
            for h, n in b[3]:
                with open(os.path.join(store, h), "rb") as f:
                    run = json.loads(f.read())
                assert sum(c[1] for c in run) == n, (ref, h)
                cl.extend(run)
            assert sum(c[1] for c in cl) == b[1], ref
            desc["b"][j] = [b[0], b[1], cl]
    return desc


def restore(agent, spool, store, manifest, extra=None):
    rdir = tempfile.mkdtemp(dir=spool)
    groups = []
    for i, g in enumerate(manifest["groups"]):
        e = dict(g)
        if g["k"] != "imp":
            desc = expand(store, g["r"])
            e["desc"] = desc
            pf = os.path.join(rdir, "g%d.p" % i)
            with open(pf, "wb") as out:
                for h, n in desc["p"]:
                    with open(os.path.join(store, h), "rb") as f:
                        out.write(f.read())
            e["pf"] = pf
            e["bf"] = []
            for j, (_, _, cl) in enumerate(desc["b"]):
                bf = os.path.join(rdir, "g%d.b%d" % (i, j))
                with open(bf, "wb") as out:
                    for h, n in cl:
                        with open(os.path.join(store, h), "rb") as f:
                            out.write(f.read())
                e["bf"].append(bf)
        groups.append(e)
    r = call(agent, "restore", dict({"clear": True, "groups": groups, "cwd": manifest.get("cwd"), "env": manifest.get("env"),
                                     "skipped": manifest.get("skipped") or []}, **(extra or {})))
    shutil.rmtree(rdir, ignore_errors=True)
    return r


def interrupted_checkpoint(agent, spool, store, token, committed):
    """A snapshot that a KeyboardInterrupt stops half way (in serialize, as a user's interrupt meant
    for the cell that just ended would): "INTERRUPTED", or what the snapshot answered."""
    from carryover_agent import snapshot
    real = snapshot._serialize

    def stop(*args):
        raise KeyboardInterrupt()
    snapshot._serialize = stop
    try:
        checkpoint(agent, spool, store, token, committed)
        return "NOT INTERRUPTED"
    except KeyboardInterrupt:
        return "INTERRUPTED"
    finally:
        snapshot._serialize = real


def main():
    """python3 agent_harness.py <spool> <store> <plan.json>: a new "kernel" that optionally restores
    plan["manifest"], sets the execution counter to plan["execution_count"] when given (as the server
    sets a new kernel's to the session's), then runs plan["steps"]: {"run": code} (a cell; its repr or "ERROR ..."),
    {"checkpoint": true} (its result, manifest and bytes written; with "interrupt": true, stopped half way
    by a KeyboardInterrupt: interrupted_checkpoint), {"restore": N} (the checkpoint of step N restored
    into this kernel, as a checkpoint restore does; its answer). Prints the step results as JSON."""
    spool, store, ppath = sys.argv[1:4]
    with open(ppath) as f:
        plan = json.load(f)
    sh, agent = new_shell(spool)
    out = {"steps": []}
    if plan.get("manifest"):
        out["restore"] = restore(agent, spool, store, plan["manifest"], plan.get("restore_args"))
    if plan.get("execution_count"):
        sh.execution_count = plan["execution_count"]
    committed = ""
    for i, step in enumerate(plan.get("steps", [])):
        if "run" in step:
            res = sh.run_cell(step["run"], store_history=True)
            err = res.error_in_exec or res.error_before_exec
            out["steps"].append("ERROR %s: %s" % (type(err).__name__, err) if err is not None else repr(res.result))
        elif "restore" in step:  # a checkpoint restore into this live kernel: the manifest of step N
            out["steps"].append(restore(agent, spool, store, out["steps"][step["restore"]]["manifest"]))
        elif "checkpoint" in step and step.get("interrupt"):
            out["steps"].append(interrupted_checkpoint(agent, spool, store, "t%d" % i, committed))
        elif "checkpoint" in step:
            token = "t%d" % i
            r, manifest, written = checkpoint(agent, spool, store, token, committed, step.get("chunk_size", 1 << 20))
            committed = token if not step.get("fail_commit") else committed
            out["steps"].append({"result": r, "manifest": manifest, "written": written})
    sys.stdout.flush()
    print("\n@@RESULT@@" + json.dumps(out))


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:  # a fork server of such kernels (zygote.py)
        import zygote
        zygote.serve(main)
    else:
        main()
