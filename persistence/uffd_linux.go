package persistence

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The userfaultfd calls the lazy restore makes (linux/userfaultfd.h). The kernel process creates the
// userfaultfd (from the /dev/userfaultfd descriptor the server lends it) and hands it over; the
// server fills its pages with UFFDIO_COPY, which copies into the kernel process's memory.
const (
	uffdioCopy     = 0xC028AA03 // _IOWR(0xAA, 0x03, struct uffdio_copy)
	uffdioZeropage = 0xC020AA04 // _IOWR(0xAA, 0x04, struct uffdio_zeropage)
	uffdioWake     = 0x8010AA02 // _IOR(0xAA, 0x02, struct uffdio_range)
	uffdCopyModeWP = 2          // the page is installed write-protected: its first write is marked
	uffdEventFault = 0x12
	uffdMsgSize    = 32
	uffdDevicePath = "/dev/userfaultfd"
)

var uffdDev struct {
	once sync.Once
	f    *os.File
	err  error
}

// uffdDevice is /dev/userfaultfd, opened once: the server needs read-write access to it (root, or a
// group the operator grants); without it every restore is eager.
func uffdDevice() (*os.File, error) {
	uffdDev.once.Do(func() {
		uffdDev.f, uffdDev.err = os.OpenFile(uffdDevicePath, os.O_RDWR|unix.O_CLOEXEC, 0)
	})
	return uffdDev.f, uffdDev.err
}

type uffdioCopyArg struct {
	dst, src, len, mode uint64
	copied              int64
}

type uffdioRangeArg struct {
	start, len uint64
}

type uffdioModeArg struct {
	start, len, mode uint64
	done             int64
}

func uffdIoctl(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// uffdCopy copies src (a multiple of the page size) to dst in the registered process, installed
// write-protected, and wakes the threads waiting on those pages. It returns how many bytes it copied
// before an error: EEXIST (a page already present) and EAGAIN (a partial copy) are the caller's to
// step over.
func uffdCopy(fd int, dst uintptr, src []byte) (int64, error) {
	a := uffdioCopyArg{dst: uint64(dst), src: uint64(uintptr(unsafe.Pointer(&src[0]))), len: uint64(len(src)), mode: uffdCopyModeWP}
	err := uffdIoctl(fd, uffdioCopy, unsafe.Pointer(&a))
	runtime.KeepAlive(src)
	if err != nil && a.copied > 0 {
		return a.copied, err
	}
	if err != nil {
		return 0, err
	}
	return int64(len(src)), nil
}

// uffdZero maps the zero page at [dst, dst+n) (anonymous memory's content once discarded) and wakes
// its waiters; a page already present is only woken.
func uffdZero(fd int, dst uintptr, n int) error {
	a := uffdioModeArg{start: uint64(dst), len: uint64(n)}
	err := uffdIoctl(fd, uffdioZeropage, unsafe.Pointer(&a))
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.EAGAIN) {
		return uffdWake(fd, dst, n)
	}
	return err
}

// uffdWake wakes the threads waiting on [dst, dst+n).
func uffdWake(fd int, dst uintptr, n int) error {
	r := uffdioRangeArg{start: uint64(dst), len: uint64(n)}
	return uffdIoctl(fd, uffdioWake, unsafe.Pointer(&r))
}
