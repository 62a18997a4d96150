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

	client  *Client   // to dial again after a drop (wsreconnect.go)
	session string    //
	resume  resumable // what a reconnect sends again; touched by Next's and Send's callers
}

// Connect opens the session's websocket. A refused upgrade (unknown session, bad token) returns
// the answer as an *Error.
func (c *Client) Connect(ctx context.Context, sessionID string) (*Conn, error) {
	conn, err := c.dial(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	conn.client, conn.session = c, sessionID
	go conn.read()
	return conn, nil
}

// dial opens the session's websocket without starting its reader.
func (c *Client) dial(ctx context.Context, sessionID string) (*Conn, error) {
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
	return &Conn{ws: ws, frames: make(chan Frame, 64), done: make(chan struct{})}, nil
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
	c.wmu.Lock()
	ws, frames := c.ws, c.frames
	c.wmu.Unlock()
	defer close(frames)
	for {
		_, data, err := ws.ReadMessage()
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
		case frames <- f:
		case <-c.done:
			c.readErr = ErrClosed
			return
		}
	}
}

// Next returns the next frame. After the connection ends it returns the read error; a drop
// that a server's restart causes is ridden out first (wsreconnect.go).
func (c *Conn) Next(ctx context.Context) (Frame, error) {
	if len(c.backlog) > 0 {
		f := c.backlog[0]
		c.backlog = c.backlog[1:]
		return f, nil
	}
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				err := c.closedErr()
				if err != ErrClosed && dropped(err) && c.reconnect(ctx) == nil {
					continue
				}
				return Frame{}, err
			}
			c.seen(f)
			return f, nil
		case <-ctx.Done():
			return Frame{}, ctx.Err()
		}
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
	c.track(frame)
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
		ws := c.ws
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		_ = ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		c.wmu.Unlock()
		err = ws.Close()
	})
	return err
}

// newFrameID is a run id unique enough for one session ("c-" and 12 hex digits).
func newFrameID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "c-" + hex.EncodeToString(b)
}
