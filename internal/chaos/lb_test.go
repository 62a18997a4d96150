package chaos

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// balancer is a TCP load balancer in front of a cluster's nodes, as a deployment puts one (the
// Kubernetes Service of deploy/kubernetes, whose readiness probe is GET /readyz): each new
// connection goes to the next ready node in turn, and to the one after it when that node refuses
// (it is down or restarting). Readiness is polled every 100 ms; when no node is ready, every node
// is tried. A connection stays on the node it reached (a draining node answers or forwards what
// comes on it).
type balancer struct {
	ln      net.Listener
	targets []string
	ready   []atomic.Bool
	next    atomic.Uint64
	wg      sync.WaitGroup
	stop    context.CancelFunc
}

// startBalancer listens on a free loopback port in front of targets (host:port each).
func startBalancer(targets []string) (*balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	b := &balancer{ln: ln, targets: targets, ready: make([]atomic.Bool, len(targets)), stop: stop}
	b.wg.Add(2)
	go b.accept()
	go b.probe(ctx)
	return b, nil
}

func (b *balancer) addr() string { return b.ln.Addr().String() }

func (b *balancer) close() { b.stop(); b.ln.Close(); b.wg.Wait() }

// probe polls every node's GET /readyz until ctx ends.
func (b *balancer) probe(ctx context.Context) {
	defer b.wg.Done()
	hc := &http.Client{Timeout: time.Second}
	for {
		for i, t := range b.targets {
			ok := false
			if resp, err := hc.Get("http://" + t + "/readyz"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ok = resp.StatusCode == http.StatusOK
			}
			b.ready[i].Store(ok)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (b *balancer) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.serve(c)
	}
}

// order is the nodes to try for a new connection: the ready ones from the next in turn, else all.
func (b *balancer) order() []string {
	start := b.next.Add(1)
	var ready, all []string
	for i := range uint64(len(b.targets)) {
		j := (start + i) % uint64(len(b.targets))
		all = append(all, b.targets[j])
		if b.ready[j].Load() {
			ready = append(ready, b.targets[j])
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return all
}

// serve dials the nodes in order; a connection no node takes is closed.
func (b *balancer) serve(c net.Conn) {
	defer c.Close()
	for _, t := range b.order() {
		up, err := net.Dial("tcp", t)
		if err != nil {
			continue
		}
		defer up.Close()
		go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
		io.Copy(c, up)
		return
	}
}
