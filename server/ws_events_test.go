package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
)

// A client whose event backlog is long and who reads it slowly still has its other frames served
// meanwhile: a ping sent while 4,000 stored events wait for it is answered after the few thousand
// already queued, not after the whole backlog (the reader served subscribe_events itself, so the
// client's next frame, an interrupt as much as a ping, waited for every event of the log to be
// queued). Every event still arrives, once and in order. A second subscription ends the first and
// sends from its own after_sequence.
func TestEventBacklogDoesNotHoldTheClientsFrames(t *testing.T) {
	t.Parallel()
	const logged = 4000
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "evslow"})
	var last int64
	start := time.Now()
	pad := strings.Repeat("x", 6000) // 24 MB in all: more than the sockets' buffers hold
	for i := 0; i < logged; i++ {
		// JSON made here, not by json.Marshal: 24 MB escaped byte by byte under the race detector
		// was most of this test's CPU.
		payload := json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))
		ev, err := ts.srv.Store.AppendEvent(t.Context(), "evslow", "custom.tick", payload)
		if err != nil {
			t.Fatal(err)
		}
		last = ev.SequenceNumber
	}
	t.Logf("%d events logged in %v", logged, time.Since(start))
	c := slowReaderWS(t, ts, "evslow")
	if err := c.WriteJSON(map[string]any{"type": "subscribe_events", "after_sequence": 0}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // not reading: the backlog fills what the client takes and waits
	if err := c.WriteJSON(map[string]any{"type": "ping", "id": "p1"}); err != nil {
		t.Fatal(err)
	}
	seqs, beforePong := readEventsUntil(t, c, last, "p1")
	t.Logf("the pong came after %d of %d events", beforePong, last)
	if beforePong < 0 || beforePong >= logged {
		t.Errorf("the pong came after %d of the %d events (want it before the backlog's end: the "+
			"reader waited for the whole backlog to be queued)", beforePong, last)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("events arrived out of order or twice: #%d is %d (of %d)", i, s, len(seqs))
		}
	}
	if int64(len(seqs)) != last {
		t.Fatalf("%d events arrived, want %d", len(seqs), last)
	}

	// A second subscription while the first still sends: the first stops, the second sends from the tenth last.
	if err := c.WriteJSON(map[string]any{"type": "subscribe_events", "after_sequence": 0}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteJSON(map[string]any{"type": "subscribe_events", "after_sequence": last - 10}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteJSON(map[string]any{"type": "ping", "id": "p2"}); err != nil {
		t.Fatal(err)
	}
	seqs, _ = readEventsUntil(t, c, last, "p2")
	if n := len(seqs); n < 10 || seqs[n-10] != last-9 || seqs[n-1] != last {
		t.Errorf("after a second subscription from %d the last events were %v, want %d..%d", last-10,
			seqs[max(n-12, 0):], last-9, last)
	}
}

// slowReaderWS dials id's websocket with a receive buffer of 64 KiB, so that a backlog the test
// does not read soon waits on the server (the stream's pacing) rather than in the sockets' buffers.
func slowReaderWS(t *testing.T, ts *testServer, id string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = nc.(*net.TCPConn).SetReadBuffer(64 << 10)
		}
		return nc, err
	}}
	u := strings.Replace(ts.base, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws?token=" + testToken
	c, _, err := d.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readEventsUntil reads frames until the event numbered last and the pong of pingID have both come,
// and answers the events' numbers in arrival order and how many came before the pong. Its deadline
// is a stall's, renewed at each frame: reading 24 MB under the race detector on a loaded machine
// took more than a minute in CI (a 60 s deadline for the whole read failed there), and how fast the
// frames come is not what this test asserts.
func readEventsUntil(t *testing.T, c *websocket.Conn, last int64, pingID string) (seqs []int64, beforePong int) {
	t.Helper()
	beforePong = -1
	for beforePong < 0 || len(seqs) == 0 || seqs[len(seqs)-1] < last {
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		var f struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Event carryover.Event `json:"event"`
		}
		if err := c.ReadJSON(&f); err != nil {
			t.Fatalf("reading frames after %d events: %v", len(seqs), err)
		}
		switch {
		case f.Type == "event":
			seqs = append(seqs, f.Event.SequenceNumber)
		case f.Type == "pong" && f.ID == pingID:
			beforePong = len(seqs)
		case f.Type == "error":
			t.Fatalf("error frame: %+v", f)
		}
	}
	return seqs, beforePong
}
