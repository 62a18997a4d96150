#!/usr/bin/python3
"""A stand-in for the carryover API, for working on the UI without the Go server.

Development aid only: it speaks the parts of shared/API.md the UI uses (plus the UI extensions:
/executions, /complete, the websocket "running" frame), runs a real IPython kernel per session through
jupyter_client, and fakes the checkpoint by trying to pickle each user variable. It serves web/static
straight from disk, so a browser reload picks up edits.

    /usr/bin/python3 web/dev/mockserver.py --port 8899 --token dev
    open http://127.0.0.1:8899/?token=dev
"""
import argparse
import asyncio
import json
import os
import pathlib
import shutil
import tempfile
import time
import uuid
from datetime import datetime, timezone

import tornado.ioloop
import tornado.web
import tornado.websocket
from jupyter_client.manager import AsyncKernelManager

STATIC = pathlib.Path(__file__).resolve().parent.parent / "static"
TOKEN = "dev"
DATA = pathlib.Path(tempfile.mkdtemp(prefix="carryover-mock-"))

PROBE = r'''
def __co_probe():
    import pickle, types, json as _j
    ip = get_ipython()
    skip = set(ip.user_ns_hidden) | {"In", "Out", "exit", "quit", "get_ipython", "open"}
    saved, skipped = [], []
    for k, v in list(ip.user_ns.items()):
        if k.startswith("_") or k in skip or isinstance(v, types.ModuleType):
            continue
        try:
            pickle.dumps(v)
            saved.append(k)
        except Exception as e:
            skipped.append({"name": k, "type": type(v).__name__, "reason": str(e)[:200]})
    return _j.dumps({"names": saved, "skipped": skipped})
'''


def now():
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def err(handler, status, code, message, details=None):
    handler.set_status(status)
    handler.set_header("Content-Type", "application/json")
    handler.finish(json.dumps({"error": {"code": code, "message": message, "details": details or {}}}))


class Session:
    def __init__(self, sid, name=None, budget=None):
        self.id = sid
        self.name = name
        self.state = "pending"
        self.created = now()
        self.last = self.created
        self.budget = budget or {}
        self.iterations = 0
        self.duration = 0.0
        self.km = None
        self.kc = None
        self.lock = asyncio.Lock()
        self.subs = set()
        self.events = []
        self.executions = []
        self.checkpoints = []
        self.current = None  # running run: {"id", "code", "outputs"}
        self.prev_hashes = {}
        self.ws = DATA / sid
        self.ws.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.event("session_created", {})

    def obj(self):
        return {
            "id": self.id, "name": self.name, "language": "python", "state": self.state,
            "sandbox": {"id": "sbx_" + self.id, "status": "live" if self.kc else "none", "cpus": "2",
                        "memory": "4Gi", "timeout_seconds": 3600, "network": False},
            "data": {}, "agent_context": {"working_dir": "/workspace", "env_vars": {}, "custom_state": {}},
            "budget": self.budget,
            "budget_consumed": {"cost_cents": round(self.duration * 0.01, 4), "iterations": self.iterations,
                                "duration_seconds": round(self.duration, 2)},
            "last_checkpoint": ({"id": self.checkpoints[-1]["id"], "turn": self.checkpoints[-1]["turn"],
                                 "created_at": self.checkpoints[-1]["created_at"]} if self.checkpoints else None),
            "created_at": self.created, "updated_at": self.last, "last_activity": self.last,
        }

    def event(self, etype, payload):
        ev = {"sequence_number": len(self.events) + 1, "event_type": etype, "payload": payload, "created_at": now()}
        self.events.append(ev)
        for s in list(self.subs):
            if s.events_after is not None and ev["sequence_number"] > s.events_after:
                s.events_after = ev["sequence_number"]
                s.frame({"type": "event", "event": ev})

    def broadcast(self, f):
        for s in list(self.subs):
            s.frame(f)

    async def ensure(self):
        if self.kc:
            return
        self.km = AsyncKernelManager(kernel_name="python3")
        self.km.kernel_spec_manager.ensure_native_kernel = True
        await self.km.start_kernel(cwd=str(self.ws), extra_arguments=["--matplotlib=inline"])
        self.kc = self.km.client()
        self.kc.allow_stdin = True
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=30)
        self.state = "running"
        self.event("sandbox_created", {"sandbox_id": "sbx_" + self.id})
        self.event("session_started", {})

    async def run(self, rid, code, sub=None):
        async with self.lock:
            await self.ensure()
            self.current = {"id": rid, "code": code, "outputs": [], "input": None}
            self.broadcast({"type": "status", "id": rid, "execution_state": "busy"})
            t0 = time.time()
            started = now()
            msg_id = self.kc.execute(code, allow_stdin=True, stop_on_error=True)
            outputs, status, count = [], "ok", None
            stdin_task = asyncio.ensure_future(self.stdin_loop(rid, msg_id))
            while True:
                msg = await self.kc.get_iopub_msg(timeout=3600)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                t, c = msg["msg_type"], msg["content"]
                if t == "status" and c["execution_state"] == "idle":
                    break
                if t == "execute_input":
                    count = c["execution_count"]
                    continue
                o = None
                if t == "stream":
                    o = {"type": "stream", "name": c["name"], "text": c["text"]}
                elif t in ("display_data", "update_display_data"):
                    o = {"type": t, "data": c["data"], "metadata": c.get("metadata", {}), "transient": c.get("transient", {})}
                elif t == "execute_result":
                    o = {"type": t, "data": c["data"], "metadata": c.get("metadata", {}), "execution_count": c["execution_count"]}
                elif t == "error":
                    o = {"type": "error", "ename": c["ename"], "evalue": c["evalue"], "traceback": c["traceback"]}
                    status = "error"
                elif t == "clear_output":
                    o = {"type": "clear_output", "wait": c.get("wait", False)}
                if o:
                    outputs.append(o)
                    self.current["outputs"].append(o)
                    self.broadcast({"type": "output", "id": rid, "output": o})
            reply = await self.kc.get_shell_msg(timeout=30)
            stdin_task.cancel()
            if reply["content"].get("status") == "aborted":
                status = "aborted"
            dur = (time.time() - t0) * 1000
            self.iterations += 1
            self.duration += dur / 1000
            self.count = count or self.count + 1
            ck = await self.checkpoint()
            stdout = "".join(o["text"] for o in outputs if o["type"] == "stream" and o["name"] == "stdout")
            stderr = "".join(o["text"] for o in outputs if o["type"] == "stream" and o["name"] == "stderr")
            res = next((o["data"].get("text/plain") for o in outputs if o["type"] == "execute_result"), None)
            result = {"session_id": self.id, "execution_count": self.count, "status": status, "stdout": stdout,
                      "stderr": stderr, "result": res, "outputs": outputs, "error": None, "duration_ms": dur, "checkpoint": ck}
            self.executions.append({"execution_count": self.count, "kind": "run", "code": code, "status": status,
                                    "result": result, "started_at": started, "duration_ms": dur})
            self.current = None
            self.last = now()
            self.broadcast({"type": "result", "id": rid, "result": result})
            self.broadcast({"type": "status", "id": rid, "execution_state": "idle"})
            return result

    async def stdin_loop(self, rid, msg_id):
        while True:
            try:
                msg = await self.kc.get_stdin_msg(timeout=0.2)
            except Exception:
                await asyncio.sleep(0.05)
                continue
            if msg["msg_type"] == "input_request":
                c = msg["content"]
                fut = asyncio.get_event_loop().create_future()
                self.current["input"] = fut
                self.broadcast({"type": "input_request", "id": rid, "prompt": c["prompt"], "password": c["password"]})
                value = await fut
                self.kc.input(value)

    async def checkpoint(self):
        t0 = time.time()
        mid = self.kc.execute(PROBE + "\n__co_r = __co_probe()", silent=True, user_expressions={"r": "__co_r"}, store_history=False)
        rep = await self.kc.get_shell_msg(timeout=30)
        while rep["parent_header"].get("msg_id") != mid:
            rep = await self.kc.get_shell_msg(timeout=30)
        try:
            data = json.loads(eval(rep["content"]["user_expressions"]["r"]["data"]["text/plain"]))
        except Exception as e:  # noqa
            data = {"names": [], "skipped": []}
        files = [p for p in self.ws.rglob("*") if p.is_file()]
        ck = {"id": "ck_" + uuid.uuid4().hex[:10], "turn": len(self.checkpoints) + 1, "saved": data["names"],
              "unchanged": 0, "skipped": data["skipped"], "files_saved": len(files),
              "files_skipped": [{"path": p.name, "reason": "hidden"} for p in files if p.name.startswith(".")],
              "bytes_written": 100 + 37 * len(data["names"]), "duration_ms": (time.time() - t0) * 1000}
        self.checkpoints.append({"id": ck["id"], "turn": ck["turn"], "created_at": now(), "variables": data["names"],
                                 "files": len(files), "bytes": ck["bytes_written"]})
        self.event("checkpoint_created", {"checkpoint_id": ck["id"], "turn": ck["turn"]})
        if data["skipped"]:
            self.event("variables_skipped", {"skipped": data["skipped"]})
        return ck


SESSIONS = {}


class Base(tornado.web.RequestHandler):
    def check_xsrf_cookie(self):
        pass

    def prepare(self):
        auth = self.request.headers.get("Authorization", "")
        tok = auth.split(" ", 1)[1] if " " in auth else self.get_argument("token", "")
        if tok != TOKEN:
            err(self, 401, "unauthorized", "missing or wrong token")

    def body(self):
        try:
            return json.loads(self.request.body or b"{}")
        except Exception:
            return {}

    def ok(self, obj, status=200):
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(obj))

    def sess(self, sid):
        s = SESSIONS.get(sid)
        if not s:
            err(self, 404, "not_found", f"no session {sid}")
        return s


class Sessions(Base):
    def get(self):
        self.ok({"sessions": [s.obj() for s in SESSIONS.values()]})

    def post(self):
        b = self.body()
        sid = b.get("session_id") or "s-" + uuid.uuid4().hex[:8]
        if sid in SESSIONS:
            return err(self, 409, "conflict", f"session {sid} already exists")
        s = Session(sid, b.get("name"), b.get("budget"))
        SESSIONS[sid] = s
        self.ok({"session": s.obj()}, 201)


class One(Base):
    def get(self, sid):
        s = self.sess(sid)
        if s:
            self.ok({"session": s.obj()})

    async def delete(self, sid):
        s = self.sess(sid)
        if not s:
            return
        if s.km:
            await s.km.shutdown_kernel(now=True)
        del SESSIONS[sid]
        shutil.rmtree(s.ws, ignore_errors=True)
        self.set_status(204)
        self.finish()


class Action(Base):
    async def post(self, sid, action):
        s = self.sess(sid)
        if not s:
            return
        if action == "run":
            b = self.body()
            rid = "run-%d" % (len(s.executions) + 1)
            return self.ok(await s.run(rid, b.get("code", "")))
        if action == "interrupt":
            if s.km:
                await s.km.interrupt_kernel()
            return self.ok({"session": s.obj()})
        if action == "restart":
            if s.km:
                await s.km.restart_kernel(now=True)
                await s.kc.wait_for_ready(timeout=30)
            s.event("sandbox_created", {"restart": True})
            return self.ok({"session": s.obj()})
        if action == "complete":
            await s.ensure()
            b = self.body()
            s.kc.complete(b["code"], b.get("cursor_pos"))
            rep = await s.kc.get_shell_msg(timeout=10)
            c = rep["content"]
            return self.ok({"matches": c["matches"], "cursor_start": c["cursor_start"], "cursor_end": c["cursor_end"], "metadata": c.get("metadata", {})})
        if action == "checkpoint":
            await s.ensure()
            await s.checkpoint()
            return self.ok({"session": s.obj()})
        if action in ("pause", "resume", "stop", "cancel", "rotate", "start"):
            s.state = {"pause": "paused", "resume": "running", "stop": "completed", "cancel": "cancelled"}.get(action, s.state)
            s.event("session_" + {"pause": "paused", "resume": "resumed", "stop": "completed", "cancel": "cancelled"}.get(action, action), {})
            return self.ok({"session": s.obj()})
        if action == "exec":
            b = self.body()
            cmd = b.get("command")
            p = await asyncio.create_subprocess_shell(cmd if isinstance(cmd, str) else " ".join(cmd), cwd=s.ws,
                                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            t0 = time.time()
            o, e = await p.communicate()
            r = {"stdout": o.decode(), "stderr": e.decode(), "exit_code": p.returncode, "duration_ms": (time.time() - t0) * 1000}
            s.executions.append({"execution_count": None, "kind": "exec", "code": cmd, "status": "ok" if p.returncode == 0 else "error",
                                 "result": r, "started_at": now(), "duration_ms": r["duration_ms"]})
            return self.ok(r)
        err(self, 404, "not_found", "unknown action " + action)


class Listing(Base):
    def get(self, sid, what):
        s = self.sess(sid)
        if not s:
            return
        if what == "executions":
            lim = int(self.get_argument("limit", "200"))
            return self.ok({"executions": s.executions[-lim:]})
        if what == "events":
            after = int(self.get_argument("after_sequence", "0"))
            lim = int(self.get_argument("limit", "50"))
            return self.ok({"events": [e for e in s.events if e["sequence_number"] > after][:lim]})
        if what == "checkpoints":
            return self.ok({"checkpoints": s.checkpoints})
        if what == "variables":  # names only: the mock's checkpoints keep no types or sizes
            last = s.checkpoints[-1] if s.checkpoints else {"variables": [], "id": None}
            return self.ok({"variables": [{"name": n, "state": "saved"} for n in last["variables"]], "live": False,
                            "checkpoint_id": last["id"], "note": "mock server: names from the latest checkpoint"})
        if what == "files":
            files = []
            for p in sorted(s.ws.rglob("*")):
                if p.is_file():
                    st = p.stat()
                    files.append({"path": str(p.relative_to(s.ws)), "size": st.st_size,
                                  "modified_at": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat()})
            return self.ok({"files": files})
        err(self, 404, "not_found", "unknown listing")


class CheckpointDetail(Base):
    def get(self, sid, cid):
        s = self.sess(sid)
        if not s:
            return
        c = next((c for c in s.checkpoints if c["id"] == cid), None)
        if not c:
            return err(self, 404, "not_found", f"no checkpoint {cid}")
        self.ok({"checkpoint": {"id": cid, "turn": c["turn"], "created_at": c["created_at"], "skipped": [], "files": [],
                                "files_skipped": [], "variables": [{"name": n, "kind": "data", "ref": f"{cid}:{n}", "bytes": 0}
                                                                   for n in c["variables"]]}})


class Restore(Base):
    def post(self, sid, cid):
        s = self.sess(sid)
        if not s:
            return
        c = next((c for c in s.checkpoints if c["id"] == cid), None)
        if not c:
            return err(self, 404, "not_found", f"no checkpoint {cid}")
        s.event("checkpoint_restored", {"checkpoint_id": cid, "turn": c["turn"]})
        self.ok({"session": s.obj()})


class File(Base):
    def target(self, sid, path):
        s = self.sess(sid)
        if not s:
            return None, None
        path = path.removeprefix("/workspace/").lstrip("/")
        p = (s.ws / path).resolve()
        if not str(p).startswith(str(s.ws.resolve())):
            err(self, 400, "invalid_request", "path outside the workspace")
            return None, None
        return s, p

    def get(self, sid, path):
        s, p = self.target(sid, path)
        if not s:
            return
        if not p.is_file():
            return err(self, 404, "not_found", f"no file {path}")
        self.set_header("Content-Type", "application/octet-stream")
        self.finish(p.read_bytes())

    def put(self, sid, path):
        s, p = self.target(sid, path)
        if not s:
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(self.request.body)
        self.set_status(201)
        self.finish()

    def delete(self, sid, path):
        s, p = self.target(sid, path)
        if not s:
            return
        if not p.is_file():
            return err(self, 404, "not_found", f"no file {path}")
        p.unlink()
        self.set_status(204)
        self.finish()


class WS(tornado.websocket.WebSocketHandler):
    def check_origin(self, origin):
        return True

    def open(self, sid):
        if self.get_argument("token", "") != TOKEN:
            self.close(4401, "unauthorized")
            return
        self.s = SESSIONS.get(sid)
        if not self.s:
            self.close(4404, "not found")
            return
        self.events_after = None
        self.s.subs.add(self)
        cur = self.s.current
        if cur:
            self.frame({"type": "running", "id": cur["id"], "code": cur["code"], "execution_count": None, "outputs": list(cur["outputs"])})

    def frame(self, f):
        try:
            self.write_message(json.dumps(f))
        except tornado.websocket.WebSocketClosedError:
            self.s.subs.discard(self)

    async def on_message(self, m):
        f = json.loads(m)
        t = f.get("type")
        if t == "run":
            asyncio.ensure_future(self.s.run(f["id"], f["code"]))
        elif t == "input_reply":
            cur = self.s.current
            if cur and cur.get("input") and not cur["input"].done():
                cur["input"].set_result(f.get("value", ""))
        elif t == "interrupt":
            if self.s.km:
                await self.s.km.interrupt_kernel()
        elif t == "subscribe_events":
            after = int(f.get("after_sequence", 0))
            for e in self.s.events:
                if e["sequence_number"] > after:
                    self.frame({"type": "event", "event": e})
            self.events_after = max([after] + [e["sequence_number"] for e in self.s.events])

    def on_close(self):
        if getattr(self, "s", None):
            self.s.subs.discard(self)


class Static(tornado.web.StaticFileHandler):
    def set_extra_headers(self, path):
        self.set_header("Cache-Control", "no-cache")

    @classmethod
    def get_absolute_path(cls, root, path):
        p = os.path.join(root, path)
        return p if os.path.isfile(p) else os.path.join(root, "index.html")

    def validate_absolute_path(self, root, absolute_path):
        return absolute_path


class Health(tornado.web.RequestHandler):
    def get(self):
        self.finish({"status": "ok"})


def main():
    global TOKEN
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8899)
    ap.add_argument("--token", default="dev")
    a = ap.parse_args()
    TOKEN = a.token
    app = tornado.web.Application([
        (r"/healthz", Health),
        (r"/api/sessions", Sessions),
        (r"/api/sessions/([^/]+)", One),
        (r"/api/sessions/([^/]+)/ws", WS),
        (r"/api/sessions/([^/]+)/(executions|events|checkpoints|files|variables)", Listing),
        (r"/api/sessions/([^/]+)/checkpoints/([^/]+)", CheckpointDetail),
        (r"/api/sessions/([^/]+)/files/(.+)", File),
        (r"/api/sessions/([^/]+)/checkpoints/([^/]+)/restore", Restore),
        (r"/api/sessions/([^/]+)/(run|interrupt|restart|complete|checkpoint|pause|resume|stop|cancel|rotate|start|exec)", Action),
        (r"/(.*)", Static, {"path": str(STATIC), "default_filename": "index.html"}),
    ])
    app.listen(a.port, "127.0.0.1")
    print(f"mock carryover on http://127.0.0.1:{a.port}/?token={TOKEN} (data {DATA})", flush=True)
    tornado.ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
