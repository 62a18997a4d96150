package client_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

func TestWebsocketRun(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{})
	conn, err := api.Connect(ctx, s.ID)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer conn.Close()
	res, frames, err := conn.Run(ctx, "c1", "for i in range(3): print(i)")
	if err != nil || res == nil || res.Stdout != "0\n1\n2\n" || res.Status != client.StatusOK {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	var streamed strings.Builder
	for _, f := range frames {
		if f.ID != "c1" {
			t.Errorf("frame of another run: %+v", f)
		}
		if f.Type == client.FrameOutput {
			streamed.WriteString(f.Output.Text)
		}
	}
	first, last := frames[0], frames[len(frames)-1]
	if first.Type != client.FrameStatus || first.ExecutionState != "busy" || last.ExecutionState != "idle" {
		t.Errorf("frames begin with %+v and end with %+v", first, last)
	}
	if streamed.String() != "0\n1\n2\n" {
		t.Fatalf("streamed %q", streamed.String())
	}

	if err := conn.Send(ctx, client.SubscribeEvents{AfterSequence: 0}); err != nil {
		t.Fatalf("SubscribeEvents: %v", err)
	}
	f, err := conn.Next(ctx)
	if err != nil || f.Type != client.FrameEvent || f.Event.SequenceNumber != 1 {
		t.Fatalf("first event frame: %+v, %v", f, err)
	}
}

func TestWebsocketTimeout(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{})
	conn, err := api.Connect(ctx, s.ID)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer conn.Close()
	res, _, err := conn.RunFrame(ctx, client.RunFrame{Code: "import time\ntime.sleep(30)", TimeoutSeconds: client.Seconds(0.5)})
	if client.ErrorCode(err) != client.CodeTimeout || res == nil || res.Status != client.StatusError {
		t.Fatalf("RunFrame: %+v, %v", res, err)
	}
	// Nothing of that run is left over for the next one.
	res, _, err = conn.Run(ctx, "after", "1+1")
	if err != nil || resultOf(res) != "2" {
		t.Fatalf("next run: %+v, %v", res, err)
	}
}

func TestConnectUnknownSession(t *testing.T) {
	_, err := api.Connect(testCtx(t), "no-such-session")
	wantAPIError(t, err, http.StatusNotFound, client.CodeNotFound)
}
