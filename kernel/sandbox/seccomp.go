package sandbox

// seccomp.go builds the system-call filter every box runs under (bubblewrap's --seccomp FD loads it
// just before it execs the box's first program, so the kernel, its children and exec commands are
// all filtered, and nothing in the box can lift it).
//
// It starts from Docker's default profile, taken from the module Docker itself generates its
// default.json from (github.com/moby/profiles/seccomp), resolved for this architecture, this kernel
// and a process with NO capabilities (a box has none after setpriv). That alone denies, with EPERM:
// new namespaces (unshare, setns, clone with any CLONE_NEW* flag), mount/umount/pivot_root and the
// new mount API (fsopen, fsmount, move_mount, open_tree, mount_setattr), bpf, perf_event_open,
// keyctl/add_key/request_key, kexec_load/kexec_file_load, init/finit/delete_module, io_uring_*
// (Docker dropped it: a large, often-patched attack surface no notebook needs), personality other
// than the harmless values, acct, quotactl, swapon/swapoff, reboot, settimeofday/clock_settime,
// syslog, chroot, iopl/ioperm, vhangup, lookup_dcookie, fanotify_init, open_by_handle_at, kcmp,
// pidfd_getfd, process_madvise, mbind/set_mempolicy/get_mempolicy, userfaultfd, and the obsolete
// calls (uselib, ustat, sysfs, _sysctl, nfsservctl, vm86, create_module, get_kernel_syms, ...). Every
// call the profile does not name is denied with EPERM too, so a Python caller sees a clean
// PermissionError instead of a killed kernel.
//
// Where this filter differs from Docker's, and why:
//   - userfaultfd is allowed when its flags carry UFFD_USER_MODE_ONLY (Docker denies it outright):
//     the checkpoint engine tracks dirty pages with it (WP_ASYNC + PAGEMAP_SCAN), and user-mode-only
//     descriptors cannot stall kernel-mode faults, which is what made userfaultfd an exploitation aid.
//   - Only the native 64-bit ABI is allowed: 32-bit (int 0x80) calls hit the default action and
//     x32 ones get ENOSYS (Docker allows both sub-architectures). A notebook runs no 32-bit
//     binaries, and the compat entry points are where several kernel bugs lived.
//   - Syscalls whose names the BPF assembler does not know for this architecture are left out (they
//     get EPERM): the profile lists every architecture's names, and calls newer than the assembler's
//     table are rare enough in Python stacks to be allowed only after someone looks at them.
//
// Kept as Docker has them (each considered): clone3 answers ENOSYS (its flags sit in memory a filter
// cannot read, so glibc falls back to clone, whose flags it can); ptrace and process_vm_readv/writev
// stay allowed (kernel >= 4.8 re-checks seccomp after a tracer's changes; the pid namespace and the
// box's own uid already hide every process outside the box, so only the box's own processes can be
// traced, which is what py-spy and gdb in a notebook need); socket is allowed for every family but
// AF_VSOCK (network reach is the network namespace's business, not the filter's).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"os"
	"path/filepath"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	bpfarch "github.com/elastic/go-seccomp-bpf/arch"
	moby "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// UFFDUserModeOnly is userfaultfd(2)'s UFFD_USER_MODE_ONLY flag (linux/userfaultfd.h).
const UFFDUserModeOnly = 1

// SeccompPolicy is the filter's policy: Docker's default profile for a process without
// capabilities on this architecture and kernel, plus the differences documented above.
func SeccompPolicy() (*bpfseccomp.Policy, error) {
	prof, err := moby.GetDefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		return nil, fmt.Errorf("seccomp: docker's default profile: %w", err)
	}
	info, err := bpfarch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	def, err := action(prof.DefaultAction, prof.DefaultErrnoRet)
	if err != nil {
		return nil, err
	}
	p := &bpfseccomp.Policy{DefaultAction: def}
	for _, sc := range prof.Syscalls {
		g, err := group(sc, info)
		if err != nil {
			return nil, err
		}
		if len(g.Names)+len(g.NamesWithCondtions) > 0 {
			p.Syscalls = append(p.Syscalls, g)
		}
	}
	// The first difference: userfaultfd with UFFD_USER_MODE_ONLY (the checkpoint engine's).
	p.Syscalls = append(p.Syscalls, bpfseccomp.SyscallGroup{Action: bpfseccomp.ActionAllow,
		NamesWithCondtions: []bpfseccomp.NameWithConditions{{Name: "userfaultfd", Conditions: bpfseccomp.ArgumentConditions{
			{Argument: 0, Operation: bpfseccomp.BitsSet, Value: UFFDUserModeOnly}}}}})
	return p, nil
}

// group converts one rule of the resolved OCI profile into the assembler's terms.
func group(sc specs.LinuxSyscall, info *bpfarch.Info) (bpfseccomp.SyscallGroup, error) {
	act, err := action(sc.Action, sc.ErrnoRet)
	if err != nil {
		return bpfseccomp.SyscallGroup{}, err
	}
	g := bpfseccomp.SyscallGroup{Action: act}
	var conds bpfseccomp.ArgumentConditions
	for _, a := range sc.Args {
		c, err := condition(a)
		if err != nil {
			return g, fmt.Errorf("seccomp: %v: %w", sc.Names, err)
		}
		conds = append(conds, c)
	}
	for _, n := range sc.Names {
		if _, known := info.SyscallNames[n]; !known || slices.Contains(g.Names, n) {
			continue // another architecture's name (chown32, ...) or one newer than the assembler
		}
		if len(conds) == 0 {
			g.Names = append(g.Names, n)
		} else {
			g.NamesWithCondtions = append(g.NamesWithCondtions, bpfseccomp.NameWithConditions{Name: n, Conditions: conds})
		}
	}
	return g, nil
}

// action maps an OCI action; errno actions keep their errno (EPERM when none is given).
func action(a specs.LinuxSeccompAction, errno *uint) (bpfseccomp.Action, error) {
	switch a {
	case specs.ActAllow:
		return bpfseccomp.ActionAllow, nil
	case specs.ActErrno:
		if errno == nil || *errno == uint(unix.EPERM) {
			return bpfseccomp.ActionErrno, nil // the assembler adds EPERM
		}
		return bpfseccomp.ActionErrno | bpfseccomp.Action(*errno&0xffff), nil
	}
	return 0, fmt.Errorf("seccomp: unsupported action %s in the profile", a)
}

// condition maps an OCI argument comparison. MASKED_EQ is supported with a zero value ("none of
// these bits"), the only form Docker's profile uses (clone's CLONE_NEW* mask).
func condition(a specs.LinuxSeccompArg) (bpfseccomp.Condition, error) {
	c := bpfseccomp.Condition{Argument: uint32(a.Index), Value: a.Value}
	switch a.Op {
	case specs.OpEqualTo:
		c.Operation = bpfseccomp.Equal
	case specs.OpNotEqual:
		c.Operation = bpfseccomp.NotEqual
	case specs.OpLessThan:
		c.Operation = bpfseccomp.LessThan
	case specs.OpLessEqual:
		c.Operation = bpfseccomp.LessOrEqual
	case specs.OpGreaterThan:
		c.Operation = bpfseccomp.GreaterThan
	case specs.OpGreaterEqual:
		c.Operation = bpfseccomp.GreaterOrEqual
	case specs.OpMaskedEqual:
		if a.ValueTwo != 0 {
			return c, fmt.Errorf("unsupported masked comparison (mask %#x, value %#x)", a.Value, a.ValueTwo)
		}
		c.Operation = bpfseccomp.BitsNotSet
	default:
		return c, fmt.Errorf("unsupported comparison %s", a.Op)
	}
	return c, nil
}

// SeccompProgram assembles the policy into the raw classic-BPF program bubblewrap's --seccomp reads
// (an array of struct sock_filter in native byte order).
func SeccompProgram() ([]byte, error) {
	p, err := SeccompPolicy()
	if err != nil {
		return nil, err
	}
	insns, err := p.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	if len(raw) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program of %d instructions is over the kernel's %d", len(raw), unix.BPF_MAXINSNS)
	}
	var buf bytes.Buffer
	for _, r := range raw {
		_ = binary.Write(&buf, binary.NativeEndian, struct {
			Code   uint16
			Jt, Jf uint8
			K      uint32
		}{r.Op, r.Jt, r.Jf, r.K})
	}
	return buf.Bytes(), nil
}

// writeSeccomp assembles the filter once and writes it into the state dir, where each box's wrapper
// opens it for bubblewrap (root's file; no box binds the state dir itself).
func (m *Manager) writeSeccomp() error {
	prog, err := SeccompProgram()
	if err != nil {
		return err
	}
	f := filepath.Join(m.cfg.StateDir, "seccomp.bpf")
	if err := os.WriteFile(f, prog, 0o600); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	m.seccomp = f
	return nil
}
