package sandbox

import (
	"encoding/binary"
	"runtime"
	"testing"

	bpfarch "github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// verdict runs the assembled filter in x/net/bpf's interpreter on a struct seccomp_data. The
// interpreter loads words big-endian (it is made for packets), so each 32-bit word is stored
// big-endian, at the offsets of the little-endian layout the filter reads (low half of an
// argument first).
func verdict(t *testing.T, vm *bpf.VM, arch uint32, nr int, args ...uint64) uint32 {
	t.Helper()
	data := make([]byte, 64) // nr, arch, instruction_pointer, args[6]
	binary.BigEndian.PutUint32(data[0:], uint32(nr))
	binary.BigEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
	}
	v, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

// TestSeccompPolicy checks the filter's verdicts call by call, without a kernel: the differences
// from Docker's profile that seccomp.go documents, and a sample of what both deny and allow.
func TestSeccompPolicy(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86-64 numbers")
	}
	p, err := SeccompPolicy()
	if err != nil {
		t.Fatal(err)
	}
	insns, err := p.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := SeccompProgram()
	if err != nil || len(prog) != 8*len(insns) {
		t.Fatalf("program: %d bytes for %d instructions, %v", len(prog), len(insns), err)
	}
	t.Logf("%d instructions", len(insns))
	info, _ := bpfarch.GetInfo("")
	arch := uint32(info.ID)
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	cases := []struct {
		name string
		nr   int
		args []uint64
		want uint32
	}{
		{"read", unix.SYS_READ, nil, allow},
		{"execve", unix.SYS_EXECVE, nil, allow},
		{"clone (fork, thread)", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, allow},
		{"clone CLONE_NEWUSER", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"clone CLONE_NEWNS", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNS | uint64(unix.SIGCHLD)}, eperm},
		{"clone3", unix.SYS_CLONE3, nil, enosys},
		{"unshare", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"mount", unix.SYS_MOUNT, nil, eperm},
		{"pivot_root", unix.SYS_PIVOT_ROOT, nil, eperm},
		{"bpf", unix.SYS_BPF, nil, eperm},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, nil, eperm},
		{"keyctl", unix.SYS_KEYCTL, nil, eperm},
		{"kexec_load", unix.SYS_KEXEC_LOAD, nil, eperm},
		{"finit_module", unix.SYS_FINIT_MODULE, nil, eperm},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, nil, eperm},
		{"personality(0)", unix.SYS_PERSONALITY, []uint64{0}, allow},
		{"personality(READ_IMPLIES_EXEC)", unix.SYS_PERSONALITY, []uint64{0x0400000}, eperm},
		{"socket(AF_INET)", unix.SYS_SOCKET, []uint64{unix.AF_INET}, allow},
		{"socket(AF_VSOCK)", unix.SYS_SOCKET, []uint64{unix.AF_VSOCK}, eperm},
		{"ptrace", unix.SYS_PTRACE, nil, allow},
		{"userfaultfd(0)", unix.SYS_USERFAULTFD, []uint64{0}, eperm},
		{"userfaultfd(UFFD_USER_MODE_ONLY|O_CLOEXEC)", unix.SYS_USERFAULTFD, []uint64{UFFDUserModeOnly | unix.O_CLOEXEC}, allow},
		{"x32 read", unix.SYS_READ | 0x40000000, nil, enosys},
		{"unknown number", 1000, nil, eperm},
	}
	for _, c := range cases {
		if got := verdict(t, vm, arch, c.nr, c.args...); got != c.want {
			t.Errorf("%s: verdict %#x, want %#x", c.name, got, c.want)
		}
	}
	// 32-bit x86 (int 0x80) gets the default: EPERM for everything, read included.
	if got := verdict(t, vm, uint32(bpfarch.I386.ID), 3); got != eperm {
		t.Errorf("i386 read: verdict %#x, want EPERM", got)
	}
}
