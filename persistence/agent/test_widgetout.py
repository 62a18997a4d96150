"""In-process unit tests of what an Output widget is recorded to show (widgetstate's capture), without
a kernel. Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_*.py'."""

import unittest

from carryover_agent import widgetstate as w


class OutputCaptureTest(unittest.TestCase):
    def setUp(self):
        w._CAP[:] = ["m1"]
        w.OUTPUTS.clear()
        w._STREAM_TAIL.clear()

    def tearDown(self):
        w._CAP[:] = []
        w.OUTPUTS.clear()
        w._STREAM_TAIL.clear()

    def stream(self, text, name="stdout"):
        w._keep_output({"type": "stream", "name": name, "text": text})

    def test_prints_merge_in_order(self):
        for t in ("a", "b", "c"):
            self.stream(t)
        self.stream("e", "stderr")
        self.stream("f", "stderr")
        outs = w._outputs("m1")
        self.assertEqual([(o["name"], o["text"]) for o in outs], [("stdout", "abc"), ("stderr", "ef")])

    def test_a_long_print_loop_is_bounded_and_linear(self):
        # 200,000 prints into one stream: the recorded text is its last MAX_OUTPUT_BYTES, ending with
        # the last line (it grew without the bound before, and joining the text at every print copied
        # all of it each time: this loop took minutes; ~1 s now).
        for i in range(200000):
            self.stream("line %d\n" % i)
        outs = w._outputs("m1")
        self.assertEqual(len(outs), 1)
        self.assertEqual(len(outs[0]["text"]), w.MAX_OUTPUT_BYTES)
        self.assertTrue(outs[0]["text"].endswith("line 199998\nline 199999\n"))

    def test_clear_drops_pending_pieces(self):
        self.stream("a")
        self.stream("b")
        w._clear()
        self.stream("c")
        self.assertEqual([o["text"] for o in w._outputs("m1")], ["c"])


if __name__ == "__main__":
    unittest.main()
