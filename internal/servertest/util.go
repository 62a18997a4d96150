package servertest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/carryover/carryover/internal/freeport"
)

// SyncBuffer is a bytes.Buffer that a server process (or a command run in-process) writes while the
// test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreeAddr is a loopback address with a port free right now, for a process that must be told its
// address before it starts (and keep it across restarts). The port is picked at random BELOW the
// kernel's ephemeral range (ip_local_port_range): every port an OS picks on its own (a kernel's five
// ZMQ ports, a client's outgoing connection, another test's "127.0.0.1:0") comes from that range, so
// none of them can take this port while the server that owns it is down between a kill -9 and its
// restart (a restart failed with "address already in use" that way). Only another FreeAddr could
// pick the same port, one chance in ~10,000 per pick.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func freeAddr() (string, error) { return freeport.Addr() }

// ID is a session id unique to the test and the run (the test's name, lower case, and random hex),
// so tests that share a server, or run in parallel on one, never meet in each other's sessions.
func ID(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, t.Name())
	if len(name) > 100 {
		name = name[:100]
	}
	return name + "-" + RandHex(4)
}

// RandHex is n random bytes in hex.
func RandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
