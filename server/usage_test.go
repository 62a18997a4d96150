package server_test

import (
	"net/http"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/servertest"
)

// holdAndBurn allocates 200 MiB and spins the CPU for 1.5 s, then frees it all: the once-a-second
// samples see the memory while it is held, so the peak has it while the kernel's memory now does not.
const holdAndBurn = "import time\ndef burn():\n    b = b'x' * (200 << 20)\n    t = time.process_time()\n" +
	"    while time.process_time() - t < 1.5: pass\nburn()"

// TestUsageOutlivesKernels: GET .../usage on real kernels. The memory peak seen in one kernel stays
// the session's through a restart, a hibernation, a wake and a restart of the server; the CPU
// seconds only grow (a wake adds the new kernel's to the old ones'); stored bytes are the bytes of
// the checkpoints the session lists; an unknown session answers 404 in the API's error shape.
func TestUsageOutlivesKernels(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	id := servertest.ID(t)
	ts.newSession(client.CreateRequest{SessionID: id})
	ts.run(id, holdAndBurn)
	first := ts.usage(id)
	if first.MemoryPeakBytes < 200<<20 || first.MemoryBytes >= first.MemoryPeakBytes || first.CPUSeconds < 1.4 || first.Sandbox != "live" {
		t.Fatalf("usage after the burn = %s, want a peak over 200 MiB above the memory now, and 1.5 CPU seconds", dump(first))
	}
	ts.act(ts.c.Restart, id)
	restarted := ts.usage(id)
	ts.act(ts.c.Hibernate, id)
	hibernated := ts.usage(id)
	if hibernated.Sandbox != "hibernated" || hibernated.MemoryBytes != 0 {
		t.Errorf("usage of the hibernated session = %s", dump(hibernated))
	}
	ts.run(id, holdAndBurn) // the wake, and 1.5 CPU seconds more in a new kernel
	woken := ts.usage(id)
	for _, u := range []*client.Usage{restarted, hibernated, woken} {
		if u.MemoryPeakBytes < first.MemoryPeakBytes {
			t.Errorf("the peak was lost with its kernel: %s (first %d)", dump(u), first.MemoryPeakBytes)
		}
	}
	if restarted.CPUSeconds < first.CPUSeconds || hibernated.CPUSeconds < restarted.CPUSeconds || woken.CPUSeconds < hibernated.CPUSeconds+1.4 {
		t.Errorf("CPU seconds %.2f, restarted %.2f, hibernated %.2f, woken %.2f: a new kernel must add to them",
			first.CPUSeconds, restarted.CPUSeconds, hibernated.CPUSeconds, woken.CPUSeconds)
	}
	cps, err := ts.c.Checkpoints(ts.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, cp := range cps {
		bytes += cp.Bytes
	}
	if woken.StoredBytes != bytes || bytes == 0 || woken.Checkpoints != len(cps) {
		t.Errorf("stored %d bytes in %d checkpoints; the checkpoints list %d bytes in %d", woken.StoredBytes, woken.Checkpoints, bytes, len(cps))
	}
	again := ts.restart()
	if u := again.usage(id); u.MemoryPeakBytes < woken.MemoryPeakBytes || u.CPUSeconds < woken.CPUSeconds {
		t.Errorf("after a restart of the server: %s, before it %s", dump(u), dump(woken))
	}
	_, err = again.c.Usage(again.ctx(), "no-such-session")
	errCode(t, err, http.StatusNotFound, "not_found")
}

// usage fetches session id's usage or fails the test.
func (ts *testServer) usage(id string) *client.Usage {
	ts.t.Helper()
	u, err := ts.c.Usage(ts.ctx(), id)
	if err != nil {
		ts.t.Fatalf("usage of %s: %v", id, err)
	}
	return u
}
