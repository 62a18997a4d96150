package jupyter

// channels.go: one kernel channels websocket. A reader decodes the client's frames and hands them
// to the kernel's bridge; a writer drains the connection's queue and pings every 30 s.

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/kernel"
)

const (
	pingEvery           = 30 * time.Second
	closeServiceRestart = 1012 // JupyterLab reconnects on it (1000/1001 make it give up)
	queueCap            = 1 << 14
)

// conn is one channels websocket.
type conn struct {
	sid  string // the client's session_id (channels?session_id=): its sockets across reconnects
	ws   *websocket.Conn
	v1   bool
	out  chan kernel.RawMessage
	done chan struct{}
	once sync.Once
	mu   sync.Mutex // guards closing and ws (set once the handshake is answered)
	code int        // the close code the writer sends
	text string
}

func (d *Door) channels(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := d.lookup(r, id); err != nil {
		d.writeError(w, err)
		return
	}
	d.mu.Lock()
	closing := d.closing
	d.mu.Unlock()
	if closing {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "carryover is restarting", http.StatusServiceUnavailable)
		return
	}
	// Programs connect without Origin; browsers come with the token, which is the check.
	up := websocket.Upgrader{ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10, Subprotocols: []string{subprotocolV1},
		CheckOrigin: func(*http.Request) bool { return true }}
	// The client joins the kernel's bridge before the handshake is answered: once its dial returned
	// it gets every iopub message, even of a cell another client sends at once (the messages wait
	// in its queue until the writer starts).
	c := &conn{sid: r.URL.Query().Get("session_id"), v1: slices.Contains(websocket.Subprotocols(r), subprotocolV1),
		out: make(chan kernel.RawMessage, queueCap), done: make(chan struct{})}
	b := d.bridgeFor(id)
	b.add(c)
	defer b.remove(c)
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // gorilla answered the bad handshake
	}
	c.mu.Lock()
	c.ws = ws
	c.mu.Unlock()
	go c.writer()
	b.failLost()
	c.reader(b)
}

// reader decodes frames until the socket closes.
func (c *conn) reader(b *bridge) {
	defer c.close(websocket.CloseNormalClosure, "")
	c.ws.SetReadLimit(256 << 20)
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		var m kernel.RawMessage
		switch {
		case c.v1 && typ == websocket.BinaryMessage:
			m, err = decodeV1(data)
		case typ == websocket.BinaryMessage:
			m, err = decodeLegacyBinary(data)
		default:
			m, err = decodeLegacyText(data)
		}
		if err != nil {
			b.d.log.Warn("jupyter: bad websocket frame dropped", "kernel", b.id, "err", err)
			continue
		}
		if m.Channel == "" {
			m.Channel = "shell"
		}
		b.fromClient(c, m)
	}
}

// send queues m for the client; a client too slow to take 16k messages is disconnected rather
// than letting the server's memory grow without bound.
func (c *conn) send(m kernel.RawMessage) {
	select {
	case <-c.done:
	case c.out <- m:
	default:
		c.close(websocket.CloseTryAgainLater, "client too slow: message queue full")
	}
}

func (c *conn) writer() {
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	defer c.ws.Close()
	for {
		select {
		case m := <-c.out:
			if err := c.write(m); err != nil {
				c.close(websocket.CloseAbnormalClosure, "")
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second)); err != nil {
				return
			}
		case <-c.done:
			c.mu.Lock()
			code, text := c.code, c.text
			c.mu.Unlock()
			if code != websocket.CloseAbnormalClosure {
				_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(2*time.Second))
			}
			return
		}
	}
}

func (c *conn) write(m kernel.RawMessage) error {
	if c.v1 {
		return c.ws.WriteMessage(websocket.BinaryMessage, encodeV1(m))
	}
	bin, data := encodeLegacy(m)
	typ := websocket.TextMessage
	if bin {
		typ = websocket.BinaryMessage
	}
	return c.ws.WriteMessage(typ, data)
}

// close ends the connection with code (the first close wins).
func (c *conn) close(code int, text string) {
	c.once.Do(func() {
		c.mu.Lock()
		c.code, c.text = code, text
		c.mu.Unlock()
		close(c.done)
		// Unblock the reader: the writer sends the close frame, then the socket goes.
		go func() {
			time.Sleep(2 * time.Second)
			c.mu.Lock()
			ws := c.ws // nil when closed before its handshake was answered: the writer closes it then
			c.mu.Unlock()
			if ws != nil {
				_ = ws.Close()
			}
		}()
	})
}
