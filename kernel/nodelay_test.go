package kernel

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// testTCPNoDelay checks, on our own file descriptors, that the tcp connections zmq4 made to the
// kernel have TCP_NODELAY (Go's default; zmq4 does not change it). Without it every small message
// waits for Nagle and a 1+1 round trip grows by tens of ms (what Jupyter Server suffers here).
func testTCPNoDelay(t *testing.T, k *Kernel) {
	ci := k.Connection()
	kernelPorts := map[int]bool{}
	for _, p := range ci.ports() {
		kernelPorts[p] = true
	}
	// inode -> remote port, for our connections to the kernel.
	inodes := map[string]int{}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 10 || fl[0] == "sl" {
			continue
		}
		rem := strings.Split(fl[2], ":")
		port, err := strconv.ParseInt(rem[len(rem)-1], 16, 32)
		if err == nil && kernelPorts[int(port)] && fl[3] == "01" { // ESTABLISHED
			inodes[fl[9]] = int(port)
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	checked := map[int]bool{}
	for _, e := range fds {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		port, ok := inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")]
		if !ok {
			continue
		}
		fd, _ := strconv.Atoi(e.Name())
		v, err := syscall.GetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
		if err != nil {
			t.Fatalf("getsockopt fd %d: %v", fd, err)
		}
		if v == 0 {
			t.Errorf("connection to kernel port %d has Nagle on (TCP_NODELAY=0)", port)
		}
		checked[port] = true
	}
	if len(checked) != 5 {
		t.Errorf("checked %d of the 5 kernel connections: %v", len(checked), checked)
	}
}
