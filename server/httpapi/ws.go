package httpapi

import (
	"github.com/carryover/carryover"

	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsFrame is a client -> server message.
type wsFrame struct {
	Type           string   `json:"type"`
	ID             string   `json:"id"`
	Code           string   `json:"code"`
	TimeoutSeconds *float64 `json:"timeout_seconds"`
	Value          string   `json:"value"`
	AfterSequence  int64    `json:"after_sequence"`
}

// checkOrigin allows clients without an Origin (programs), the server's own host, and configured origins.
func (a *API) checkOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) || a.origins[strings.TrimRight(o, "/")] {
		return true
	}
	return false
}

func (a *API) websocket(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ls, err := a.svc.get(id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.checkOrigin(r) {
		writeError(w, carryover.Errorf(carryover.CodeUnauthorized, "websocket origin %q is not allowed", r.Header.Get("Origin")))
		return
	}
	up := websocket.Upgrader{ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10, CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade already answered
	}
	conn.SetReadLimit(a.maxBody)
	c := &wsClient{api: a, ls: ls, conn: conn, sub: newSubscriber()}
	c.serve(r.Context())
}

// wsClient is one websocket connection: a writer goroutine drains the subscriber queue, the reader
// handles client frames; runs execute in their own goroutines so input_reply and interrupt get through.
type wsClient struct {
	api  *API
	ls   *liveSession
	conn *websocket.Conn
	sub  *subscriber

	runs sync.WaitGroup
}

func (c *wsClient) serve(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	// A client connecting mid-run gets that run's outputs so far, then the live ones: joining the
	// hub and copying the outputs happen under the run's lock, so nothing is doubled or missed.
	c.ls.mu.Lock()
	if act := c.ls.running; act != nil {
		act.mu.Lock()
		c.ls.hub.add(c.sub)
		b, _ := json.Marshal(act.frameLocked())
		c.sub.send(b)
		act.mu.Unlock()
	} else {
		c.ls.hub.add(c.sub)
	}
	c.ls.mu.Unlock()
	writerDone := make(chan struct{})
	go c.writer(writerDone)
	defer func() {
		c.ls.hub.remove(c.sub)
		c.sub.close()
		<-writerDone
		c.conn.Close()
	}()
	for {
		var f wsFrame
		_, data, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		if err := json.Unmarshal(data, &f); err != nil {
			c.sendErr("", carryover.Errorf(carryover.CodeInvalid, "malformed JSON frame: %v", err))
			continue
		}
		switch f.Type {
		case "run":
			if f.ID == "" {
				f.ID = randomID("c")
			}
			c.runs.Add(1)
			go func(f wsFrame) {
				defer c.runs.Done()
				c.run(ctx, f)
			}(f)
		case "input_reply":
			c.ls.mu.Lock()
			act := c.ls.running
			c.ls.mu.Unlock()
			if act == nil || !act.answer(f.ID, f.Value) {
				c.sendErr(f.ID, carryover.Errorf(carryover.CodeConflict, "no input is pending for %q", f.ID))
			}
		case "interrupt":
			if err := c.api.svc.Interrupt(ctx, c.ls.id); err != nil {
				c.sendErr(f.ID, err)
			}
		case "subscribe_events":
			c.subscribeEvents(ctx, f.AfterSequence)
		case "ping":
			c.send(map[string]any{"type": "pong", "id": f.ID})
		default:
			c.sendErr(f.ID, carryover.Errorf(carryover.CodeInvalid, "unknown frame type %q", f.Type))
		}
	}
}

// writer sends queued frames; a client that stops reading for 30 s is disconnected.
func (c *wsClient) writer(done chan struct{}) {
	defer close(done)
	ping := time.NewTicker(25 * time.Second)
	defer ping.Stop()
	for {
		select {
		case b := <-c.sub.out:
			_ = c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := c.conn.WriteMessage(websocket.TextMessage, b); err != nil {
				c.sub.close()
				c.conn.Close()
				return
			}
		case <-ping.C:
			_ = c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second))
		case <-c.sub.closed:
			// Flush what is queued, then stop.
			for {
				select {
				case b := <-c.sub.out:
					_ = c.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
					if c.conn.WriteMessage(websocket.TextMessage, b) != nil {
						return
					}
				default:
					return
				}
			}
		}
	}
}

func (c *wsClient) send(v any) {
	b, err := json.Marshal(v)
	if err == nil {
		c.sub.send(b)
	}
}

func (c *wsClient) sendErr(id string, err error) {
	e := carryover.ErrorOf(err)
	c.send(map[string]any{"type": "error", "id": id, "error": e})
}

// run executes a run frame; outputs reach this client (and every other) through the session hub.
func (c *wsClient) run(ctx context.Context, f wsFrame) {
	hooks := runHooks{id: f.ID, allowInput: true}
	// The result (and idle) go to every subscriber from Run; errors go to the sender.
	if _, err := c.api.svc.Run(ctx, c.ls.id, RunRequest{Code: f.Code, TimeoutSeconds: f.TimeoutSeconds}, hooks); err != nil {
		c.sendErr(f.ID, err)
	}
}

// subscribeEvents sends stored events after seq, then live ones (deduplicated by sequence).
// Under the hub lock, so an event appended meanwhile is either in the backlog or sent live, once.
func (c *wsClient) subscribeEvents(ctx context.Context, after int64) {
	h := &c.ls.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	c.sub.afterEv.Store(after)
	evs, err := c.api.svc.store.ListEvents(ctx, c.ls.id, after, 100000, "")
	if err != nil {
		c.sendErr("", err)
		return
	}
	for _, ev := range evs {
		c.send(map[string]any{"type": "event", "event": ev})
		c.sub.afterEv.Store(ev.SequenceNumber)
	}
	c.sub.events.Store(true)
}
