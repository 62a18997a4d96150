package kernel

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestStartRetriesWhenADialMeetsAForeignSocket: over tcp another process can take a kernel's port
// between our pick and the kernel's bind. Here a socket that resets every connection holds the
// first start's iopub port: our dial's greeting fails before the kernel has logged its own bind
// error (CI, 2026-11-29: "could not exchange greetings ... connection reset by peer"), and the start
// is made again on new ports instead of failing. Not parallel: it replaces pickPorts.
func TestStartRetriesWhenADialMeetsAForeignSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0) // close with a reset
			_ = c.Close()
		}
	}()
	foreign := l.Addr().(*net.TCPAddr).Port
	var picks atomic.Int32
	orig := pickPorts
	pickPorts = func(n int) ([]int, error) {
		ports, err := orig(n)
		if err == nil && picks.Add(1) == 1 {
			ports[1] = foreign // iopub (newConnectionInfo's order)
		}
		return ports, err
	}
	defer func() { pickPorts = orig }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	k, err := Start(ctx, testOptions(t, "tcp"))
	if err != nil {
		t.Fatalf("a start whose iopub port someone else held: %v, want it started again on new ports", err)
	}
	defer k.Shutdown(context.Background())
	if n := picks.Load(); n < 2 {
		t.Errorf("ports picked %d times, want a second pick for the second start", n)
	}
	mustRun(t, k, "1+1")
}
