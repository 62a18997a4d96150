package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The port is bindable and lies below the ephemeral range, where the OS hands out no port itself.
func TestPortBelowEphemeralRangeAndFree(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if low-1-lowest >= 1000 && (p < lowest || p >= low) {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, low)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", itoa(p)))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		ln.Close()
	}
}

// A port held by a listener is never returned.
func TestPortSkipsHeldPorts(t *testing.T) {
	held := map[int]net.Listener{}
	for range 30 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := held[p]; ok {
			t.Fatalf("port %d returned while held", p)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", itoa(p)))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		held[p] = ln
	}
	for _, ln := range held {
		ln.Close()
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
