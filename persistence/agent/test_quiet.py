"""quiet.py: a snapshot says "quiet" only when nothing of the session can run without a message
(no thread, asyncio task or callback, interval timer of its own); a false "quiet" would let a
handover skip a checkpoint that something changed after.

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py' (go test runs it too)."""

import asyncio
import functools
import signal
import threading
import unittest

from carryover_agent import quiet


class QuietTest(unittest.TestCase):
    def test_thread(self):
        base = quiet.Baseline()
        self.assertTrue(quiet.quiet(base))
        stop = threading.Event()
        th = threading.Thread(target=stop.wait)
        th.start()
        try:
            self.assertFalse(quiet.quiet(base))
        finally:
            stop.set()
            th.join()
        self.assertTrue(quiet.quiet(base))

    def test_itimer(self):
        base = quiet.Baseline()
        old = signal.signal(signal.SIGALRM, lambda *a: None)
        signal.setitimer(signal.ITIMER_REAL, 30)
        try:
            self.assertFalse(quiet.quiet(base))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        self.assertTrue(quiet.quiet(base))

    def test_loop_callbacks_and_tasks(self):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            base = quiet.Baseline()
            self.assertTrue(quiet.quiet(base))
            h = loop.call_later(30, lambda: None)
            self.assertFalse(quiet.quiet(base), "a timer of the session's")
            h.cancel()
            self.assertTrue(quiet.quiet(base), "a cancelled timer runs nothing")
            h = loop.call_soon(functools.partial(print, "x"))
            self.assertFalse(quiet.quiet(base), "a callback of the session's, in a partial")
            h.cancel()

            async def forever():
                await asyncio.sleep(30)

            t = loop.create_task(forever())
            self.assertFalse(quiet.quiet(base), "a task of the session's")
            t.cancel()
            loop.run_until_complete(asyncio.gather(t, return_exceptions=True))
            self.assertTrue(quiet.quiet(base))
        finally:
            asyncio.set_event_loop(None)
            loop.close()


if __name__ == "__main__":
    unittest.main()
