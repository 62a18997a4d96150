"""Streaming over the websocket, files, checkpoints."""

import time
import unittest

import support
from carryover import ExecutionError, NotFound, Result, Sandbox, Timeout


# Streaming needs websocket-client (Debian's python3-websocket, installed by make deps): required
# here, so a machine without it fails instead of skipping the streaming tests.
import websocket  # noqa: F401


class Streaming(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = support.client()
        cls.sid = cls.client.create_session().id

    def test_callbacks_in_order(self):
        out, err, results, errors, prompts = [], [], [], [], []
        code = ("import sys, time\n"
                "for i in range(5):\n"
                "    print('line', i, flush=True)\n"
                "    time.sleep(0.02)\n"
                "print('oops', file=sys.stderr, flush=True)\n"
                "name = input('Name: ')\n"
                "print('hello', name)\n"
                "from IPython.display import display, HTML\n"
                "display(HTML('<i>x</i>'))\n"
                "len(name)")
        ex = self.client.stream_run(
            self.sid, code, on_stdout=out.append, on_stderr=err.append,
            on_result=results.append, on_error=errors.append,
            on_input=lambda prompt, password: prompts.append((prompt, password)) or "ada")
        self.assertEqual("".join(out), "".join("line %d\n" % i for i in range(5)) + "hello ada\n")
        self.assertGreaterEqual(len(out), 5)  # chunks, as the kernel sent them
        self.assertEqual("".join(err), "oops\n")
        self.assertEqual(prompts, [("Name: ", False)])
        self.assertEqual(errors, [])
        self.assertTrue(all(isinstance(r, Result) for r in results))
        self.assertEqual([(r.html, r.text) for r in results][-1], (None, "3"))
        self.assertEqual(results[0].html, "<i>x</i>")
        self.assertEqual((ex.status, ex.result), ("ok", "3"))
        self.assertEqual(ex.stdout, "".join(out))
        # The streamed turn is a turn like any other: name persists.
        self.assertEqual(self.client.run(self.sid, "name").result, "'ada'")

    def test_input_end(self):
        # No on_input, or an on_input that answers None: input() raises EOFError, so a loop
        # reading lines ends (an empty line each time never did).
        code = ("got = []\n"
                "while True:\n"
                "    try:\n"
                "        got.append(input())\n"
                "    except EOFError:\n"
                "        break\n"
                "got")
        self.assertEqual(self.client.stream_run(self.sid, code, timeout=60).result, "[]")
        lines = iter(["a", "b"])
        ex = self.client.stream_run(self.sid, code, on_input=lambda p, pw: next(lines, None), timeout=60)
        self.assertEqual(ex.result, "['a', 'b']")

    def test_error_and_timeout(self):
        errors = []
        ex = self.client.stream_run(self.sid, "{}['missing']", on_error=errors.append)
        self.assertEqual(ex.status, "error")
        self.assertEqual(len(errors), 1)
        self.assertIsInstance(errors[0], ExecutionError)
        self.assertEqual(errors[0].name, "KeyError")
        out = []
        with self.assertRaises(Timeout) as cm:
            self.client.stream_run(self.sid, "print('a', flush=True)\nimport time\ntime.sleep(5)",
                                   on_stdout=out.append, timeout=0.5)
        # Chunks are the kernel's: ipykernel's IO thread flushes on a 0.2 s timer too, and one
        # that fires inside print() sends "a" and "\n" as two stream messages (seen in CI).
        self.assertEqual("".join(out), "a\n")
        self.assertEqual(cm.exception.code, "timeout")
        self.assertIsNotNone(cm.exception.result)
        self.assertEqual(cm.exception.result.stdout, "a\n")

    def test_sandbox_run_code_streams_with_callbacks(self):
        with Sandbox("py-sbx-new", client=self.client) as fresh:  # created, deleted on exit
            self.assertEqual(fresh.session.state, "pending")
        with self.assertRaises(NotFound):
            self.client.get_session("py-sbx-new")
        sbx = Sandbox(self.sid, client=self.client)  # an existing session: reattached
        chunks = []
        ex = sbx.run_code("print('x')\nprint('y')", on_stdout=chunks.append)
        self.assertEqual("".join(chunks), "x\ny\n")
        self.assertEqual(ex.logs.stdout and "".join(ex.logs.stdout), "x\ny\n")

    def test_a_raising_callback_interrupts_the_run(self):
        def stop(text):
            raise RuntimeError("enough")
        with self.assertRaises(RuntimeError):
            self.client.stream_run(self.sid, "import time\nfor i in range(100):\n"
                                   "    print(i, flush=True)\n    time.sleep(0.1)",
                                   on_stdout=stop)
        t0 = time.monotonic()
        self.assertEqual(self.client.run(self.sid, "i < 99").result, "True")
        self.assertLess(time.monotonic() - t0, 8)

    def test_stream_events(self):
        events = self.client.stream_events(self.sid, after_sequence=0)
        try:
            first = next(events)
            second = next(events)
        finally:
            events.close()
        self.assertEqual((first.sequence_number, second.sequence_number), (1, 2))
        self.assertEqual(first.event_type, "session_started")

    def test_unknown_session(self):
        with self.assertRaises(NotFound):
            self.client.stream_run("no-such-session", "1")


class FilesAndCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = support.client()
        cls.sbx = Sandbox(client=cls.client)
        cls.sid = cls.sbx.id

    @classmethod
    def tearDownClass(cls):
        cls.sbx.kill()

    def test_files_round_trip(self):
        c = self.client
        blob = bytes(range(256)) * 10
        c.write_file(self.sid, "data/blob.bin", blob)
        c.write_file(self.sid, "/workspace/notes.md", "# héllo\n")
        c.write_agent_session_file(self.sid, "conf.json", '{"a": 1}')
        c.write_agent_session_file(self.sid, "raw.bin", b"\x00\xff")
        self.assertEqual(c.read_file(self.sid, "data/blob.bin"), blob)
        self.assertEqual(c.read_file(self.sid, "notes.md").decode(), "# héllo\n")
        self.assertEqual(c.read_file(self.sid, "/workspace/conf.json"), b'{"a": 1}')
        self.assertEqual(self.sbx.files.read("raw.bin", format="bytes"), b"\x00\xff")
        mine = {"data/blob.bin", "notes.md", "conf.json", "raw.bin"}
        listing = {f.path: f.size for f in c.list_files(self.sid) if f.path in mine}
        self.assertEqual(listing, {"data/blob.bin": 2560, "notes.md": len("# héllo\n".encode()),
                                   "conf.json": 8, "raw.bin": 2})
        # The kernel sees them in its working directory.
        self.assertEqual(self.sbx.run_code("open('notes.md').read()").text, repr("# héllo\n"))
        c.delete_file(self.sid, "notes.md")
        self.assertNotIn("notes.md", [f.path for f in self.sbx.files.list()])
        with self.assertRaises(NotFound):
            c.read_file(self.sid, "notes.md")
        with self.assertRaises(ValueError):
            c.read_file(self.sid, "/etc/passwd")

    def test_checkpoints_list_and_restore(self):
        c = self.client
        first = self.sbx.run_code("x = 1\nopen('state.txt', 'w').write('one')")
        second = self.sbx.run_code("x = 2\nopen('state.txt', 'w').write('two')")
        self.assertEqual(second.error, None)
        cps = c.list_checkpoints(self.sid)
        by_turn = {cp.turn: cp for cp in cps}
        self.assertIn(first.checkpoint["id"], [cp.id for cp in cps])
        self.assertEqual(cps[0].turn, max(by_turn))  # newest first
        self.assertIn("x", by_turn[first.checkpoint["turn"]].variables)
        res = self.sbx.restore_checkpoint(first.checkpoint["id"])
        self.assertEqual(res.checkpoint_id, first.checkpoint["id"])
        self.assertIn("x", res.restored)
        self.assertEqual(res.session.id, self.sid)
        self.assertEqual(self.sbx.run_code("x").text, "1")
        self.assertEqual(self.sbx.files.read("state.txt"), "one")
        with self.assertRaises(NotFound):
            c.restore_checkpoint(self.sid, "no-such-checkpoint")

    def test_usage(self):
        c = self.client
        # 64 MiB held for 2 s, then freed: a sample (once a second) sees it, and the peak keeps it.
        self.sbx.run_code("import time\ndef hold():\n    b = b'x' * (64 << 20)\n    time.sleep(2)\nhold()")
        usage = c.get_usage(self.sid)
        cps = c.list_checkpoints(self.sid)
        self.assertEqual(usage.session_id, self.sid)
        self.assertEqual(usage.checkpoints, len(cps))
        self.assertEqual(usage.stored_bytes, sum(cp.bytes for cp in cps))
        self.assertGreater(usage.stored_bytes, 0)
        self.assertGreater(usage.memory_peak_bytes, 64 << 20)
        self.assertGreater(usage.cpu_seconds, 0)
        with self.assertRaises(NotFound):
            c.get_usage("no-such-session")


if __name__ == "__main__":
    unittest.main()
