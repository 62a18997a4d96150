// Package freeport picks loopback ports for processes that must be told their address before they
// start (a test's S3 gateway, PostgreSQL, Jupyter Server, a cluster node that advertises itself).
//
// Asking the OS for "127.0.0.1:0" and closing the listener is not enough: the port comes from the
// kernel's ephemeral range (ip_local_port_range), and between the close and the child's bind any
// outgoing connection or other ":0" listener on the machine may be handed the same port (CI saw
// versitygw fail with "address already in use" that way). Ports here are picked at random BELOW
// that range, where the OS never hands one out on its own; only another pick from this package (or a
// process that names a fixed port) can collide, about one chance in 20,000 per pick.
package freeport

import (
	"crypto/rand"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the bottom of the range picked from: above the registered well-known services.
const lowest = 10000

// Addr is "127.0.0.1:PORT" with a port free right now.
func Addr() (string, error) {
	port, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// Port is a loopback port free right now, below the ephemeral range when that range leaves room.
func Port() (int, error) {
	lo, hi := lowest, ephemeralLow()-1
	if hi-lo < 1000 { // an unusual range: fall back to letting the OS pick
		return osPicked()
	}
	var b [2]byte
	for range 200 {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		port := lo + (int(b[0])<<8|int(b[1]))%(hi-lo+1)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use
		}
		ln.Close()
		return port, nil
	}
	return osPicked()
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1024 {
		return 32768
	}
	return n
}

func osPicked() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
