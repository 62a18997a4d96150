package servertest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"sync"
	"testing"
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
// address before it starts (and keep it across restarts). The port is free, not reserved: another
// process may take it before ours binds it, which the kernel makes unlikely by not reusing a just
// closed port at once.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

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
