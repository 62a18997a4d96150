//go:build linux || darwin

package postgres

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestPeekSocket: an idle socket is nothing; one whose peer closed, or sent, is dead — without
// consuming what waits.
func TestPeekSocket(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		return c, s
	}
	c, _ := pair()
	if err := peekSocket(c); err != nil {
		t.Fatalf("idle: %v", err)
	}
	c, s := pair()
	s.Write([]byte("E"))
	waitPeek(t, c, errSentWhileIdle)
	b := make([]byte, 1)
	if n, err := c.Read(b); n != 1 || err != nil || b[0] != 'E' {
		t.Fatalf("the peek consumed the byte: %d %v %q", n, err, b)
	}
	c, s = pair()
	s.Close()
	waitPeek(t, c, io.EOF)
}

// waitPeek waits until peekSocket(c) is want (the peer's write or close takes a moment to arrive).
func waitPeek(t *testing.T, c net.Conn, want error) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		err := peekSocket(c)
		if errors.Is(err, want) {
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("peek: %v, want %v", err, want)
		}
	}
}
