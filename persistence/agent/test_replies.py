"""The quick flush of an ipykernel output stream (replies.py), on a real OutStream and IOPub thread: a
flush with nothing left to send takes no trip to the IOPub thread; one with output still buffered,
scheduled or being sent waits for it, as ipykernel's own flush does.

Run: /usr/bin/python3 -m unittest discover -s persistence/agent -p 'test_replies.py' (go test runs it too)."""

import threading
import time
import unittest

import zmq
from ipykernel.iostream import IOPubThread, OutStream
from jupyter_client.session import Session

from carryover_agent import replies


class QuickFlushTest(unittest.TestCase):
    def setUp(self):
        self.ctx = zmq.Context()
        pub = self.ctx.socket(zmq.PUB)
        pub.bind("inproc://iopub")
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.connect("inproc://iopub")
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.thread = IOPubThread(pub)
        self.thread.start()
        self.session = Session(key=b"")
        self.stream = OutStream(self.session, self.thread, "stdout", watchfd=False)
        self.trips = 0
        schedule = self.thread.schedule

        def counted(f):
            self.trips += 1
            return schedule(f)
        self.thread.schedule = counted
        replies._quick_flush(self.stream)
        time.sleep(0.05)  # the SUB socket joins before anything is sent

    def tearDown(self):
        self.thread.stop()
        self.thread.close()
        self.sub.close()
        self.ctx.term()

    def received(self):
        """The texts of the stream messages sent so far."""
        out = []
        while self.sub.poll(200):
            _, msg = self.session.feed_identities(self.sub.recv_multipart())
            m = self.session.deserialize(msg)
            if m["msg_type"] == "stream":
                out.append(m["content"]["text"])
        return out

    def test_nothing_to_send_takes_no_trip(self):
        for _ in range(4):
            self.stream.flush()
        self.assertEqual(self.trips, 0)
        self.stream.write("one\n")
        self.stream.flush()  # buffered: the full flush, its output sent by its return
        self.assertGreater(self.trips, 0)
        self.assertEqual(self.received(), ["one\n"])
        trips = self.trips
        self.stream.flush()
        self.assertEqual(self.trips, trips)

    def test_a_send_under_way_is_waited_for(self):
        # The IOPub thread has taken the buffer (it is empty again) and is sending it: a flush must
        # not return before that send is done, or the reply could overtake the output.
        sending, release = threading.Event(), threading.Event()
        send = self.session.send

        def slow_send(*a, **kw):
            sending.set()
            release.wait(5)
            return send(*a, **kw)
        self.session.send = slow_send
        self.stream.flush_interval = 0
        self.stream.write("two\n")  # the IOPub thread's timer sends it
        self.assertTrue(sending.wait(5))
        self.assertEqual(self.stream._buffer.tell(), 0)
        done = threading.Event()
        flusher = threading.Thread(target=lambda: (self.stream.flush(), done.set()))
        flusher.start()
        self.assertFalse(done.wait(0.3), "the flush returned while the stream's output was still being sent")
        release.set()
        self.assertTrue(done.wait(5))
        flusher.join()
        self.assertEqual(self.received(), ["two\n"])


if __name__ == "__main__":
    unittest.main()
