package httpapi

import (
	"crypto/rand"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session"
	"github.com/carryover/carryover/server/session/stream"

	"context"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsFrame is a client -> server frame: run, input_reply, interrupt, subscribe_events, ping or
// comm (ws_comm.go).
type wsFrame struct {
	Type           string   `json:"type"`
	ID             string   `json:"id"`
	Code           string   `json:"code"`
	TimeoutSeconds *float64 `json:"timeout_seconds"`
	Value          string   `json:"value"`
	AfterSequence  int64    `json:"after_sequence"`
	IdempotencyKey string   `json:"idempotency_key"` // a run's: exactly-once under retries
	wsCommFields
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
	ls, err := a.svc.Session(id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.checkOrigin(r) {
		writeError(w, carryover.Errorf(carryover.CodeUnauthorized, "websocket origin %q is not allowed", r.Header.Get("Origin")))
		return
	}
	comms, err := boolParam(r, "comms") // ws_comm.go
	if err != nil {
		a.fail(w, r, err)
		return
	}
	up := websocket.Upgrader{ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10, CheckOrigin: func(*http.Request) bool { return true },
		// A request that is not a websocket handshake gets the API's error shape, not gorilla's text.
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			code := carryover.CodeInvalid
			if status >= 500 {
				code = carryover.CodeInternal
			}
			writeError(w, carryover.Errorf(code, "%v", reason).WithDetails("status", status))
		}}
	// The subscriber is attached before the handshake is answered: a client whose dial returned
	// sees every frame from then on, even of a run another client starts at once (under load the
	// handler could be scheduled after that run's first output, which was then lost to it).
	sub := stream.NewSubscriber()
	if comms {
		sub.WantComms()
	}
	detach := ls.Attach(sub)
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		detach()
		sub.Close()
		return // Upgrade already answered
	}
	conn.SetReadLimit(a.maxBody)
	c := &wsClient{api: a, id: id, conn: conn, sub: sub, comms: comms}
	if c.comms {
		go ls.SyncWidgets(r.Context(), sub) // the kernel's live widgets, for a page that (re)connects
	}
	c.serve(r.Context(), detach)
}

// wsClient is one websocket connection: a writer goroutine drains the subscriber queue, the reader
// handles client frames; runs execute in their own goroutines so input_reply and interrupt get through.
type wsClient struct {
	api  *API
	id   string // the session
	conn *websocket.Conn
	sub  *stream.Subscriber
	// comms: opened with ?comms=true, the comm relay's frames both ways (ws_comm.go)
	comms bool

	runs sync.WaitGroup
	// events is the connection's event subscription still sending its backlog (subscribe), if
	// any; only the reader touches it.
	events struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
}

// subscribe serves a subscribe_events frame in a goroutine of its own: its backlog goes out at the
// client's pace (stream.Hub.SubscribeEvents), which for a long log and a slow client takes as long
// as the client takes to read it, and meanwhile the reader must go on reading the client's frames
// (an interrupt, an input reply). A new subscription ends the one still sending, and starts once
// that one has stopped: it sends from its own after_sequence, as the client asked last.
func (c *wsClient) subscribe(ctx context.Context, after int64) {
	prev, stopPrev := c.events.done, c.events.cancel
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c.events.cancel, c.events.done = cancel, done
	if stopPrev != nil {
		stopPrev()
	}
	go func() {
		defer close(done)
		defer cancel()
		if prev != nil {
			<-prev
		}
		err := c.onSession(func(ls *session.Session) error { return ls.SubscribeEvents(sctx, c.sub, after) })
		if err != nil && sctx.Err() == nil {
			c.sendErr("", err)
		}
	}()
}

// serve runs the connection until it closes; detach takes its subscriber off the session.
func (c *wsClient) serve(ctx context.Context, detach func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	writerDone := make(chan struct{})
	go c.writer(writerDone)
	defer func() {
		detach()
		c.sub.Close()
		<-writerDone
		c.conn.Close()
	}()
	for {
		_, data, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		c.handle(ctx, data)
	}
}

// handle acts on one client frame.
func (c *wsClient) handle(ctx context.Context, data []byte) {
	var f wsFrame
	if err := unmarshal(data, &f); err != nil {
		// A field of the wrong type leaves the rest decoded: the error goes to the frame's id, so a
		// client waiting on that run hears of it.
		c.sendErr(f.ID, err)
		return
	}
	switch f.Type {
	case "run":
		if f.ID == "" {
			f.ID = randomID("c")
		}
		// The run goes on in its own goroutine (this loop must keep reading: input replies,
		// interrupts), but the next frame is read only once it holds its place in the session's
		// line, so a client's run frames execute in the order it sent them.
		queued := make(chan struct{})
		var once sync.Once
		mark := func() { once.Do(func() { close(queued) }) }
		c.runs.Add(1)
		go func() {
			defer c.runs.Done()
			defer mark() // refused before it got in line
			c.run(ctx, f, mark)
		}()
		<-queued
	case "input_reply":
		if err := c.onSession(func(ls *session.Session) error { return ls.AnswerInput(f.ID, f.Value) }); err != nil {
			c.sendErr(f.ID, err)
		}
	case "interrupt":
		if err := c.onSession(func(ls *session.Session) error { return ls.Interrupt(ctx) }); err != nil {
			c.sendErr(f.ID, err)
		}
	case "subscribe_events":
		c.subscribe(ctx, f.AfterSequence)
	case "ping":
		c.sub.Send(pongFrame{Type: "pong", ID: f.ID})
	case "comm":
		c.comm(ctx, f)
	default:
		c.sendErr(f.ID, carryover.Errorf(carryover.CodeInvalid, "unknown frame type %q", f.Type))
	}
}

// pongFrame answers a ping.
type pongFrame struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// writer sends queued frames; a client that stops reading for 30 s is disconnected.
func (c *wsClient) writer(done chan struct{}) {
	defer close(done)
	ping := time.NewTicker(25 * time.Second)
	defer ping.Stop()
	for {
		select {
		case b := <-c.sub.Frames():
			_ = c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := c.conn.WriteMessage(websocket.TextMessage, b); err != nil {
				c.sub.Close()
				c.conn.Close()
				return
			}
		case <-ping.C:
			_ = c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second))
		case <-c.sub.Closed():
			c.flush()
			return
		}
	}
}

// flush writes what is still queued, briefly, once the subscriber closed.
func (c *wsClient) flush() {
	for {
		select {
		case b := <-c.sub.Frames():
			_ = c.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if c.conn.WriteMessage(websocket.TextMessage, b) != nil {
				return
			}
		default:
			return
		}
	}
}

func (c *wsClient) sendErr(id string, err error) {
	c.sub.Send(stream.ErrorFrame{Type: "error", ID: id, Error: carryover.ErrorOf(err)})
}

// onSession calls fn with the handle of the connection's session, looked up for each frame as a
// request's is (a session deleted meanwhile answers not_found).
func (c *wsClient) onSession(fn func(*session.Session) error) error {
	ls, err := c.api.svc.Session(c.id)
	if err != nil {
		return err
	}
	return fn(ls)
}

// run executes a run frame; outputs reach this client (and every other) through the session's
// stream. The result (and idle) go to every subscriber from Run; errors go to the sender: a run's
// own (timeout, kernel death) between its result and idle, a refusal (paused, over budget) alone.
func (c *wsClient) run(ctx context.Context, f wsFrame, queued func()) {
	sent := false
	opts := session.RunOptions{ID: f.ID, AllowInput: true, Queued: queued, OnError: func(err error) {
		sent = true
		c.sendErr(f.ID, err)
	}}
	replayed := false
	opts.OnReplay = func() { replayed = true }
	var res *session.RunResult
	err := c.onSession(func(ls *session.Session) (err error) {
		res, err = ls.Run(ctx, session.RunRequest{Code: f.Code, TimeoutSeconds: f.TimeoutSeconds, IdempotencyKey: f.IdempotencyKey}, opts)
		return err
	})
	if replayed {
		c.replay(f.ID, res, err)
		return
	}
	if err != nil && !sent {
		c.sendErr(f.ID, err)
	}
}

// replay sends this client alone the frames of an earlier attempt's stored answer (a retried run
// frame with the same idempotency key): result, error, idle, as the run itself ended.
func (c *wsClient) replay(id string, res *session.RunResult, err error) {
	if res != nil {
		c.sub.Send(session.ResultFrame{Type: "result", ID: id, Result: res})
	}
	if err != nil {
		c.sendErr(id, err)
	}
	c.sub.Send(stream.StatusFrame{Type: "status", ID: id, ExecutionState: "idle"})
}

// randomID is a client run id when the frame has none.
func randomID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
