package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// A Conn rides out a server's restart: when the connection drops with 1001 (going away), 1006
// (abnormal: a killed server, a cut connection) or 1012 (service restart), Next dials the session
// again (with the Client's retry policy), subscribes to events again after the last one it gave
// out (so none is lost or repeated), and sends again the run frames that had not ended, with
// their ids and idempotency keys: the server answers those with the first attempt's frames (or the
// run's own, if it is still going) and never runs a cell twice.

// resumable is what a Conn must send again after a reconnect.
type resumable struct {
	mu         sync.Mutex // Send (any goroutine) and Next both touch it
	subscribed bool
	lastSeq    int64               // the last event given out
	runs       map[string]RunFrame // run frames not ended yet, by id
}

// track records what frame f sent (before it is sent).
func (c *Conn) track(frame any) {
	c.resume.mu.Lock()
	defer c.resume.mu.Unlock()
	switch f := frame.(type) {
	case RunFrame:
		if f.IdempotencyKey == "" {
			return // not sent again (it could run twice); its frames reach the new connection if it goes on
		}
		if c.resume.runs == nil {
			c.resume.runs = map[string]RunFrame{}
		}
		c.resume.runs[f.ID] = f
	case SubscribeEvents:
		c.resume.subscribed = true
		c.resume.lastSeq = f.AfterSequence
	}
}

// seen updates what is resumed from a frame handed out.
func (c *Conn) seen(f Frame) {
	c.resume.mu.Lock()
	defer c.resume.mu.Unlock()
	switch {
	case f.Type == FrameEvent && f.Event != nil && f.Event.SequenceNumber > c.resume.lastSeq:
		c.resume.lastSeq = f.Event.SequenceNumber
	case f.Type == FrameError, f.Type == FrameStatus && f.ExecutionState == "idle":
		delete(c.resume.runs, f.ID)
	}
}

// dropped reports whether err ended the connection in a way a reconnect rides out.
func dropped(err error) bool {
	if websocket.IsCloseError(err, websocket.CloseGoingAway, websocket.CloseAbnormalClosure, websocket.CloseServiceRestart) {
		return true
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}

// reconnect dials the session again and resends what must be resumed.
func (c *Conn) reconnect(ctx context.Context) error {
	if c.client == nil {
		return errors.New("client: connection not made by Client.Connect")
	}
	r := retrier{p: c.client.retry, start: time.Now()}
	for {
		nc, err := c.client.dial(ctx, c.session)
		if err == nil {
			c.wmu.Lock()
			c.ws, c.frames, c.readErr = nc.ws, nc.frames, nil
			c.wmu.Unlock()
			break
		}
		var ae *Error
		req, _ := http.NewRequest(http.MethodGet, c.client.baseURL, nil) // GET: a dial may be repeated
		var resp *http.Response
		if errors.As(err, &ae) {
			h := http.Header{}
			if ae.Code == CodeCapacity || ae.Code == CodeRateLimited {
				h.Set("Retry-After", "1") // the dial's answer is an error; these two say "come back"
			}
			if !retryableStatus(ae.Status, h) {
				return err
			}
			resp, err = &http.Response{StatusCode: ae.Status, Header: h, Body: http.NoBody}, nil
		}
		if !r.again(ctx, req, resp, err, true) {
			return err
		}
	}
	go c.read()
	c.resume.mu.Lock()
	var again []any
	if c.resume.subscribed {
		again = append(again, SubscribeEvents{AfterSequence: c.resume.lastSeq})
	}
	for _, f := range c.resume.runs {
		again = append(again, f)
	}
	c.resume.mu.Unlock()
	for _, f := range again {
		if err := c.Send(ctx, f); err != nil {
			return err
		}
	}
	return nil
}
