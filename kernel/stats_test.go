package kernel

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
)

// TestGroupStatsShmem: a process's shared memory (here 64 MiB of MAP_SHARED anonymous memory, which
// is shmem as a memfd is) is in RSSBytes and in ShmemBytes, its private memory only in RSSBytes.
func TestGroupStatsShmem(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	cmd := exec.Command("/usr/bin/python3", "-c", `import mmap, sys
shared = mmap.mmap(-1, 64 << 20)  # MAP_SHARED | MAP_ANONYMOUS
shared.write(b"x" * (64 << 20))
private = bytearray(b"y" * (32 << 20))
print("ready", flush=True)
sys.stdin.read()`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child said %q: %v", line, err)
	}
	st, err := GroupStats(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.ShmemBytes < 64*mib || st.ShmemBytes > 70*mib {
		t.Errorf("ShmemBytes = %d MiB, want the 64 MiB mapping", st.ShmemBytes/mib)
	}
	if st.RSSBytes-st.ShmemBytes < 32*mib {
		t.Errorf("RSS %d MiB, shmem %d MiB: the 32 MiB private buffer is missing", st.RSSBytes/mib, st.ShmemBytes/mib)
	}
}
