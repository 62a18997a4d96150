package chaos

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// balancer is a TCP load balancer in front of a cluster's nodes, as a deployment puts one (the
// Kubernetes Service of deploy/kubernetes): each new connection goes to the next node in turn, and
// to the one after it when that node refuses (it is down or restarting). A connection stays on the
// node it reached.
type balancer struct {
	ln      net.Listener
	targets []string
	next    atomic.Uint64
	wg      sync.WaitGroup
}

// startBalancer listens on a free loopback port in front of targets (host:port each).
func startBalancer(targets []string) (*balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &balancer{ln: ln, targets: targets}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

func (b *balancer) addr() string { return b.ln.Addr().String() }

func (b *balancer) close() { b.ln.Close(); b.wg.Wait() }

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

// serve dials the nodes in turn from the next one; a connection no node takes is closed.
func (b *balancer) serve(c net.Conn) {
	defer c.Close()
	start := b.next.Add(1)
	for i := range uint64(len(b.targets)) {
		up, err := net.Dial("tcp", b.targets[(start+i)%uint64(len(b.targets))])
		if err != nil {
			continue
		}
		defer up.Close()
		go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
		io.Copy(c, up)
		return
	}
}
