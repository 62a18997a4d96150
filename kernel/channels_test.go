package kernel

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// A listener that accepts and never speaks ZMTP (a tcp port stolen from the kernel) must not hang the
// start past its deadline: zmq4's handshake has no deadline of its own.
func TestDialSilentPeerGivesUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // hold it open, say nothing
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	ci := ConnectionInfo{Transport: "tcp", IP: "127.0.0.1", ShellPort: port, IOPubPort: port, StdinPort: port, ControlPort: port, HBPort: port}
	s := newSockets("test", testLogger(t), new(atomic.Uint64))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.dial(ctx, ci, nil)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dial = %v, want the deadline", err)
	}
	if took > 3*time.Second {
		t.Errorf("dial took %v after a 200ms deadline", took)
	}
	s.close(false)
	l.Close()
	<-accepted
	for _, c := range conns {
		c.Close() // releases the stuck handshakes
	}
}
