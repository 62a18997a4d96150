package doctor

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The checkpoint agent tracks the pages a cell wrote with userfaultfd in asynchronous
// write-protect mode (user-mode only: no privilege) and reads them with the PAGEMAP_SCAN ioctl
// (persistence/agent/carryover_agent/dirty.py). probeDirtyPages repeats its probe here, on a page
// of this process, with the same constants: without them the agent falls back to hashing buffers.
const (
	uffdUserModeOnly      = 1
	uffdAPI               = 0xAA
	uffdioAPI             = 0xC018AA3F
	uffdioRegister        = 0xC020AA00
	uffdioRegisterModeWP  = 2
	uffdFeatureWPUnpop    = 1 << 13
	uffdFeatureWPAsync    = 1 << 15
	pagemapScan           = 0xC0606610
	pmScanWPMatching      = 1
	pmScanCheckWPAsync    = 2
	pageIsWritten         = 2
	pmScanArgSize         = 96
	pmScanVecEntries      = 4
	pmScanVecEntryUint64s = 3
)

// probeUserfaultfd opens a user-mode userfaultfd with the async write-protect features.
func probeUserfaultfd() (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, uintptr(unix.O_CLOEXEC|unix.O_NONBLOCK|uffdUserModeOnly), 0, 0)
	if errno != 0 {
		return -1, fmt.Errorf("userfaultfd(UFFD_USER_MODE_ONLY): %w", errno)
	}
	api := [3]uint64{uffdAPI, uffdFeatureWPAsync | uffdFeatureWPUnpop, 0}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, uffdioAPI, uintptr(unsafe.Pointer(&api))); errno != 0 {
		unix.Close(int(fd))
		return -1, fmt.Errorf("UFFDIO_API(WP_ASYNC): %w", errno)
	}
	return int(fd), nil
}

// probePagemapScan registers one page for async write-protect and checks that PAGEMAP_SCAN
// reports it written after a write, and only then.
func probePagemapScan(ufd int) error {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return err
	}
	defer unix.Munmap(mem)
	mem[0] = 'x'
	start := uint64(uintptr(unsafe.Pointer(&mem[0])))
	end := start + uint64(page)
	reg := [4]uint64{start, uint64(page), uffdioRegisterModeWP, 0}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(ufd), uffdioRegister, uintptr(unsafe.Pointer(&reg))); errno != 0 {
		return fmt.Errorf("UFFDIO_REGISTER(WP): %w", errno)
	}
	pm, err := unix.Open("/proc/self/pagemap", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(pm)
	// The ioctl's argument holds the address of its output vector: both live in memory of our own
	// mapping, which Go never moves (a stack array could move under the uintptr).
	scratch, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return err
	}
	defer unix.Munmap(scratch)
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&scratch[0])), 12+pmScanVecEntries*pmScanVecEntryUint64s)
	scan := func() (int, error) {
		copy(words, []uint64{pmScanArgSize, pmScanWPMatching | pmScanCheckWPAsync, start, end, 0,
			uint64(uintptr(unsafe.Pointer(&words[12]))), pmScanVecEntries, 0, 0, pageIsWritten, 0, pageIsWritten})
		n, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(pm), pagemapScan, uintptr(unsafe.Pointer(&words[0])))
		if errno != 0 {
			return 0, fmt.Errorf("PAGEMAP_SCAN: %w", errno)
		}
		return int(n), nil
	}
	if _, err := scan(); err != nil { // the first scan write-protects the page again
		return err
	}
	if n, err := scan(); err != nil {
		return err
	} else if n != 0 {
		return errors.New("PAGEMAP_SCAN reports an untouched page as written")
	}
	mem[0] = 'y'
	if n, err := scan(); err != nil {
		return err
	} else if n != 1 {
		return errors.New("PAGEMAP_SCAN did not report a written page")
	}
	return nil
}

// A wake restores large buffers lazily with a userfaultfd the kernel makes from /dev/userfaultfd,
// which the server opens and lends it (persistence/lazy_restore.go). probeLazyRestore opens the
// device as the server does and makes one with the features the agent asks for.
const (
	uffdDevIocNew       = 0xAA00
	uffdLazyFeatures    = uffdFeatureWPAsync | uffdFeatureWPUnpop
	uffdDevicePath      = "/dev/userfaultfd"
	uffdDeviceFixAccess = "run carryover as root, or give its user read-write access to /dev/userfaultfd (a udev rule: " +
		`KERNEL=="userfaultfd", GROUP="carryover", MODE="0660"); Linux >= 6.7`
)

func probeLazyRestore() error {
	dev, err := os.OpenFile(uffdDevicePath, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer dev.Close()
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, dev.Fd(), uffdDevIocNew, uintptr(unix.O_CLOEXEC|unix.O_NONBLOCK))
	if errno != 0 {
		return fmt.Errorf("USERFAULTFD_IOC_NEW: %w", errno)
	}
	defer unix.Close(int(fd))
	api := [3]uint64{uffdAPI, uffdLazyFeatures, 0}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, uffdioAPI, uintptr(unsafe.Pointer(&api))); errno != 0 {
		return fmt.Errorf("UFFDIO_API(WP_ASYNC, WP_UNPOPULATED): %w", errno)
	}
	return nil
}
