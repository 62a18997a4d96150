package server_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// TestWebsocketBadFrameAnswersItsRun: a run frame with a field of the wrong type is refused with an
// error frame carrying the run's id (a client waiting on that run hears of it; it was sent with no
// id) and JSON's words for the type ("a string"), not Go's ("Go struct field wsFrame.code of type
// string"). A frame that is not JSON at all still gets an error frame.
func TestWebsocketBadFrameAnswersItsRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "wsbad"})
	c := ts.ws(t, "wsbad")
	send(t, c, map[string]any{"type": "run", "id": "b", "code": 5})
	f := readFrame(t, c, 30*time.Second)
	if f.Type != client.FrameError || f.ID != "b" || f.Error == nil || f.Error.Code != "invalid_request" ||
		f.Error.Message != `field "code" must be a string, not number` {
		t.Fatalf("run frame with a number for code: %s", f.Raw)
	}
	if err := c.Send(t.Context(), []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, c, 30*time.Second); f.Type != client.FrameError || f.Error == nil || f.Error.Code != "invalid_request" {
		t.Fatalf("a frame that is an array: %s", f.Raw)
	}
}

// TestWebsocketRefusesAFlagItCannotRead: ?comms= other than true or false is a 400 naming it, before
// the handshake (it was taken as false: a page that wrote comms=1 works, comms=yes got no widgets
// and no word why).
func TestWebsocketRefusesAFlagItCannotRead(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "wsflag"})
	res, err := ts.rawWS("wsflag", "?token="+testToken+"&comms=yes", nil)
	if err == nil || res == nil || res.StatusCode != 400 {
		t.Fatalf("comms=yes: %v %v", res, err)
	}
	body, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(body), `"field":"comms"`) {
		t.Fatalf("comms=yes: %s", body)
	}
	if res, err := ts.rawWS("wsflag", "?token="+testToken+"&comms=true", nil); err != nil {
		t.Fatalf("comms=true: %v %v", res, err)
	}
}
