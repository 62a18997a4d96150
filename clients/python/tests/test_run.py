"""The ERA run flow, E2B-style run_code shapes, and API errors as exceptions."""

import base64
import time
import unittest

import carryover
import support
from carryover import (Conflict, Execution, ExecutionError, InvalidRequest, NotFound, Result,
                       Sandbox, Timeout)


class RunFlow(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = support.client()
        cls.sid = cls.client.create_session(data={"user_id": "123"}).id

    def test_variable_persists_across_turns(self):
        c = self.client
        r = c.run(self.sid, "counter = 0\nimport os", update_data={"step": 1})
        self.assertEqual((r.status, r.error), ("ok", None))
        r = c.run(self.sid, "counter += 1\nprint(counter, os.environ.get('X'))\ncounter * 10",
                  env={"X": "1"}, timeout=30)
        self.assertIsInstance(r, Execution)
        self.assertEqual(r.stdout, "1 1\n")
        self.assertEqual(r.result, "10")
        self.assertIn("counter", r.checkpoint["saved"])
        r = c.run(self.sid, "counter")
        self.assertEqual(r.result, "1")
        self.assertEqual(c.get_session(self.sid).data, {"user_id": "123", "step": 1})
        self.assertEqual(c.update_session(self.sid, {"k": "v"}).data["k"], "v")

    def test_stdin_answers_input(self):
        r = self.client.run(self.sid, "a = input('a? ')\ntry:\n    input()\nexcept EOFError:\n    a += '+eof'\na",
                            stdin="yes\n")
        self.assertEqual((r.status, r.result, r.stdout), ("ok", "'yes+eof'", ""))
        r = self.client.run(self.sid, "input()")
        self.assertEqual(r.error.name, "StdinNotImplementedError")

    def test_error_in_code_is_a_status_not_an_exception(self):
        r = self.client.run(self.sid, "print('before')\n1/0")
        self.assertEqual(r.status, "error")
        self.assertFalse(r.ok)
        self.assertIsInstance(r.error, ExecutionError)
        self.assertEqual(r.error.name, "ZeroDivisionError")
        self.assertEqual(r.error.ename, "ZeroDivisionError")
        self.assertEqual(r.error.value, "division by zero")
        self.assertIn("ZeroDivisionError", r.error.traceback)
        self.assertEqual("".join(r.logs.stdout), "before\n")

    def test_timeout_raises_with_the_partial_result(self):
        with self.assertRaises(Timeout) as cm:
            self.client.run(self.sid, "print('started', flush=True)\nimport time\ntime.sleep(5)",
                            timeout=0.5)
        e = cm.exception
        self.assertEqual((e.code, e.status), ("timeout", 504))
        self.assertIsInstance(e.result, Execution)
        self.assertEqual(e.result.stdout, "started\n")
        # The kernel was interrupted, its state kept.
        self.assertEqual(self.client.run(self.sid, "1 + 1").result, "2")

    def test_api_errors(self):
        c = self.client
        with self.assertRaises(NotFound) as cm:
            c.run("no-such-session", "1")
        self.assertEqual((cm.exception.code, cm.exception.status), ("not_found", 404))
        with self.assertRaises(InvalidRequest) as cm:
            c.create_session("bad id!")
        self.assertEqual((cm.exception.code, cm.exception.status), ("invalid_request", 400))
        with self.assertRaises(Conflict) as cm:
            c.create_session(self.sid)
        self.assertEqual((cm.exception.code, cm.exception.status), ("conflict", 409))
        with self.assertRaises(InvalidRequest):
            c.request("POST", "/api/sessions/%s/run" % self.sid, {"code": 12})

    def test_execute_is_ephemeral(self):
        r = self.client.execute("21 * 2")
        self.assertEqual((r.status, r.result), ("ok", "42"))


class RunCode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sbx = Sandbox(client=support.client())

    @classmethod
    def tearDownClass(cls):
        cls.sbx.kill()

    def test_results_logs_error(self):
        ex = self.sbx.run_code("import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
                               "from IPython.display import HTML, display\n"
                               "display(HTML('<b>hi</b>'))\n'main'")
        self.assertIsNone(ex.error)
        self.assertEqual("".join(ex.logs.stdout), "out\n")
        self.assertEqual("".join(ex.logs.stderr), "err\n")
        self.assertEqual(len(ex.results), 2)
        self.assertIsInstance(ex.results[0], Result)
        self.assertEqual(ex.results[0].html, "<b>hi</b>")
        self.assertFalse(ex.results[0].is_main_result)
        self.assertIn("html", ex.results[0].formats())
        self.assertTrue(ex.results[1].is_main_result)
        self.assertEqual(ex.text, "'main'")

        ex = self.sbx.run_code("raise ValueError('bad value')")
        self.assertEqual(ex.status, "error")
        self.assertEqual((ex.error.name, ex.error.value), ("ValueError", "bad value"))
        self.assertIsInstance(ex.error.traceback, str)
        self.assertTrue(ex.error.traceback_lines)

    def test_matplotlib_image(self):
        ex = self.sbx.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
        self.assertIsNone(ex.error)
        pngs = [r for r in ex.results if r.png]
        self.assertEqual(len(pngs), 1)
        self.assertTrue(base64.b64decode(pngs[0].png).startswith(b"\x89PNG"))
        self.assertTrue(pngs[0].image_bytes().startswith(b"\x89PNG"))
        self.assertIn("png", pngs[0].formats())


if __name__ == "__main__":
    unittest.main()


class IdempotencyKeys(unittest.TestCase):
    """A call repeated with its idempotency key answers the first call's result, never runs again."""

    def test_a_run_longer_than_the_socket_timeout_answers(self):
        # the socket's timeout (1 s) shorter than the run and the retry clock (0.5 s) shorter still,
        # as a run longer than 330 s against the defaults (a server whose default run timeout is
        # above 300 s): the call is asked again with its key and answers the run's result, once
        class ShortSockets(carryover.Carryover):
            def _run_timeout(self, seconds):  # a run's socket timeout: 30 s at least, 1 s here
                return 1.0

        c = ShortSockets(support.server_url(), auth_token=support.TOKEN, retry_seconds=0.5)
        sid = c.create_session().id
        c.run(sid, "n = 0")
        t0 = time.monotonic()
        r = c.run(sid, "import time\nn += 1\ntime.sleep(3)\nprint(n)")
        self.assertEqual(r.stdout, "1\n")
        self.assertGreaterEqual(time.monotonic() - t0, 3)
        self.assertEqual(c.execute_in_agent_session(sid, "sleep 2.5; echo done").stdout, "done\n")
        self.assertEqual(support.client().run(sid, "print(n)").stdout, "1\n")

    def test_run_and_exec_with_a_key_run_once(self):
        from carryover import IdempotencyKeyReused, new_idempotency_key
        c = support.client()
        sid = c.create_session().id
        c.run(sid, "L = []")
        key = new_idempotency_key()
        first = c.run(sid, "L.append(len(L)); print(L)", idempotency_key=key)
        again = c.run(sid, "L.append(len(L)); print(L)", idempotency_key=key)
        self.assertEqual((first.stdout, again.stdout), ("[0]\n", "[0]\n"))
        self.assertEqual(first.execution_count, again.execution_count)
        with self.assertRaises(IdempotencyKeyReused):
            c.run(sid, "print('other')", idempotency_key=key)
        self.assertEqual(c.run(sid, "print(L)").stdout, "[0]\n")
        xkey = new_idempotency_key()  # POST /api/execute: a throwaway session, the key the tenant's
        x1 = c.execute("import random; print(random.random())", idempotency_key=xkey)
        x2 = c.execute("import random; print(random.random())", idempotency_key=xkey)
        self.assertEqual(x1.stdout, x2.stdout)
        self.assertNotEqual(c.execute("import random; print(random.random())").stdout,
                            c.execute("import random; print(random.random())").stdout)
        with self.assertRaises(IdempotencyKeyReused):
            c.execute("print('other')", idempotency_key=xkey)
        ekey = new_idempotency_key()
        e1 = c.execute_in_agent_session(sid, "date +%s%N", idempotency_key=ekey)
        e2 = c.execute_in_agent_session(sid, {"command": "date +%s%N", "idempotency_key": ekey})
        self.assertEqual(e1.stdout, e2.stdout)
