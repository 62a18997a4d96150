package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ErrClosed is what Next returns after Close.
var ErrClosed = errors.New("client: websocket connection closed")

// Conn is a websocket connection to one session (GET /api/sessions/{id}/ws).
//
// A goroutine reads frames as they come, so a cancelled Next loses nothing and leaves the
// connection usable. Send may be called from any goroutine; Next and Run from one at a time.
type Conn struct {
	ws      *websocket.Conn
	wmu     sync.Mutex
	frames  chan Frame
	readErr error // why frames was closed; set before the close
	done    chan struct{}
	once    sync.Once
	backlog []Frame // frames Run passed over, given out by Next first
}

// Connect opens the session's websocket. A refused upgrade (unknown session, bad token) returns
// the answer as an *Error.
func (c *Client) Connect(ctx context.Context, sessionID string) (*Conn, error) {
	u := wsURL(c.baseURL) + sessionPath(sessionID, "ws")
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	ws, resp, err := c.dialer.DialContext(ctx, u, h)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, decodeError(resp)
		}
		return nil, err
	}
	conn := &Conn{ws: ws, frames: make(chan Frame, 64), done: make(chan struct{})}
	go conn.read()
	return conn, nil
}

// wsURL turns http(s)://host into ws(s)://host.
func wsURL(base string) string {
	if rest, ok := strings.CutPrefix(base, "https://"); ok {
		return "wss://" + rest
	}
	return "ws://" + strings.TrimPrefix(base, "http://")
}

// read delivers frames to Next until the connection fails or is closed.
func (c *Conn) read() {
	defer close(c.frames)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.readErr = err
			return
		}
		f := Frame{Raw: json.RawMessage(data)}
		if err := json.Unmarshal(data, &f); err != nil {
			c.readErr = fmt.Errorf("client: malformed frame %q: %w", truncate(string(data), 200), err)
			return
		}
		select {
		case c.frames <- f:
		case <-c.done:
			c.readErr = ErrClosed
			return
		}
	}
}

// Next returns the next frame. After the connection ends it returns the read error.
func (c *Conn) Next(ctx context.Context) (Frame, error) {
	if len(c.backlog) > 0 {
		f := c.backlog[0]
		c.backlog = c.backlog[1:]
		return f, nil
	}
	select {
	case f, ok := <-c.frames:
		if !ok {
			return Frame{}, c.closedErr()
		}
		return f, nil
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}

// closedErr is why the connection ended; Close wins over the read error it causes.
func (c *Conn) closedErr() error {
	select {
	case <-c.done:
		return ErrClosed
	default:
		return c.readErr
	}
}

// Send sends a frame: RunFrame, InputReply, Interrupt, SubscribeEvents, Ping, or any value that
// marshals to an object with its own "type".
func (c *Conn) Send(ctx context.Context, frame any) error {
	b, err := encodeFrame(frame)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	deadline, _ := ctx.Deadline() // zero: none
	if err := c.ws.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// Close closes the connection (politely first). Runs it started keep running on the server.
func (c *Conn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.done)
		c.wmu.Lock()
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		c.wmu.Unlock()
		err = c.ws.Close()
	})
	return err
}

// newFrameID is a run id unique enough for one session ("c-" and 12 hex digits).
func newFrameID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "c-" + hex.EncodeToString(b)
}
