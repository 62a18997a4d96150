// Package faultproxy is a TCP proxy for fault injection in tests: it sits between a client (a node)
// and a real server (PostgreSQL, an object store) and, on command, drops new connections, stalls
// traffic, resets every open connection, or cuts connections after a number of bytes.
package faultproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the proxy does to traffic.
type Mode int32

const (
	Pass  Mode = iota // forward everything
	Drop              // refuse new connections (accept and close at once) and reset open ones
	Stall             // hold every byte (connections stay open, nothing moves)
)

// Proxy forwards a loopback port to a target address.
type Proxy struct {
	ln       net.Listener
	target   string
	mode     atomic.Int32
	cutAfter atomic.Int64 // > 0: reset each connection once it carried this many client->server bytes

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode; Drop also resets every open connection.
func (p *Proxy) Set(m Mode) {
	p.mode.Store(int32(m))
	if m == Drop {
		p.ResetAll()
	}
}

// CutAfter makes every connection (open or new) reset once it forwarded n client->server bytes in
// total (0: never), the way a store dying mid-upload looks to its client.
func (p *Proxy) CutAfter(n int64) { p.cutAfter.Store(n) }

// ResetAll closes every open connection abruptly (RST), on both sides.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

// Close stops the proxy and its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.ResetAll()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if Mode(p.mode.Load()) == Drop {
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		p.track(client, false)
		p.track(server, false)
		client.Close()
		server.Close()
	}()
	var sent atomic.Int64
	faulted := make(chan bool, 2)
	go func() { faulted <- p.pipe(server, client, &sent) }()
	go func() { faulted <- p.pipe(client, server, nil) }()
	// A direction that ended cleanly half-closed its peer; wait for the other one. A fault (cut, drop,
	// a broken side) resets both sides at once.
	if f := <-faulted; f {
		reset(client)
		reset(server)
	}
	if f := <-faulted; f {
		reset(client)
		reset(server)
	}
}

// reset closes c abruptly (RST).
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// pipe copies src to dst, honouring Stall and (for the client->server side, counted in sent) the cut.
// It reports whether it ended by a fault rather than by src's clean end (then it half-closed dst).
func (p *Proxy) pipe(dst, src net.Conn, sent *atomic.Int64) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for Mode(p.mode.Load()) == Stall {
				time.Sleep(10 * time.Millisecond)
			}
			if Mode(p.mode.Load()) == Drop {
				return true
			}
			data := buf[:n]
			if sent != nil {
				if cut := p.cutAfter.Load(); cut > 0 && sent.Load()+int64(n) >= cut {
					dst.Write(data[:max(0, cut-sent.Load())])
					return true
				}
				sent.Add(int64(n))
			}
			if _, werr := dst.Write(data); werr != nil {
				return true
			}
		}
		if err != nil {
			if err != io.EOF {
				return true
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return false
		}
	}
}
