package persistence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover"
)

// Chunk states of a lazy fill.
const (
	chunkTodo int32 = iota
	chunkFilling
	chunkFilled
	chunkGone    // its mapping or the process is gone, or the fill was cancelled: nothing waits
	chunkDamaged // could not be read or copied in: a thread touching it has the kernel killed
)

// lazyChunk is one chunk's place in the kernel process.
type lazyChunk struct {
	addr uintptr
	n    int64
	hash string
}

// lazyFill fills a kernel's lazily mapped buffers: lazyWorkers copy chunks in order, and a chunk a
// thread faulted on jumps the queue. It runs until the kernel exits (its end of the socket closes):
// the userfaultfd's registration is what the agent's dirty tracker scans, and a page the kernel
// discards after its fill (madvise) must read as zeros again, as anonymous memory does.
type lazyFill struct {
	r        carryover.ChunkReader
	uffd     *os.File
	conn     *net.UnixConn
	pidfd    int // the kernel process (the socket's peer), killed if it touches a damaged chunk; -1: none
	page     int
	chunks   []lazyChunk // in fill order: buffer by buffer
	byAddr   []int       // chunk indexes sorted by address
	state    []atomic.Int32
	prio     chan int
	next     atomic.Int64
	mu       sync.Mutex
	firstErr error
	stopOnce sync.Once
	stopped  atomic.Bool // set before the userfaultfd is closed: a copy failing after it is no damage
}

// lazyWorkers copy chunks concurrently: a chunk's read (decode, verify) overlaps another's copy.
const lazyWorkers = 2

// lazyHold, while set (tests), stops the fill in order: only chunks a thread faulted on are filled,
// so a test catches a buffer half-filled for as long as it needs.
var lazyHold atomic.Bool

// lazyDeaf, while set (tests), leaves faults unanswered: a thread touching an unfilled page waits.
var lazyDeaf atomic.Bool

// liveFills are the fills running (tests stop them all, as the server's exit would).
var liveFills sync.Map // *lazyFill -> struct{}

// lazyBeforeCopy, when set (tests), is called by a worker between reading a chunk and copying it in.
var lazyBeforeCopy atomic.Pointer[func()]

// lazyEnded, when set (tests), is called with a fill's error (nil: none) when its workers are done.
var lazyEnded atomic.Pointer[func(error)]

func newLazyFill(r carryover.ChunkReader, uffd *os.File, conn *net.UnixConn, bufs []lazyBuf, mapped []lazyMapped, page int) *lazyFill {
	f := &lazyFill{r: r, uffd: uffd, conn: conn, pidfd: peerPidfd(conn), page: page, prio: make(chan int, 1024)}
	for i, b := range bufs {
		addr := mapped[i].Addr
		for _, ch := range b.chunks {
			f.chunks = append(f.chunks, lazyChunk{addr: addr, n: ch.Len, hash: ch.Hash})
			addr += uintptr(ch.Len)
		}
	}
	f.state = make([]atomic.Int32, len(f.chunks))
	f.byAddr = make([]int, len(f.chunks))
	for i := range f.byAddr {
		f.byAddr[i] = i
	}
	sort.Slice(f.byAddr, func(a, b int) bool { return f.chunks[f.byAddr[a]].addr < f.chunks[f.byAddr[b]].addr })
	return f
}

// run fills every chunk, tells the agent ("done" or "fail: ..."), and serves faults until the
// kernel exits.
func (f *lazyFill) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	liveFills.Store(f, struct{}{})
	go f.faults()
	go func() { // the kernel's exit (or the agent closing its end) ends the fill
		var b [64]byte
		for {
			if _, err := f.conn.Read(b[:]); err != nil {
				cancel()
				f.stop()
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < lazyWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.work(ctx)
		}()
	}
	wg.Wait()
	if h := lazyEnded.Load(); h != nil {
		(*h)(f.err())
	}
	msg := "done\n"
	if err := f.err(); err != nil {
		msg = "fail: " + err.Error() + "\n"
		slog.Error("lazy restore: a buffer could not be filled; the kernel is killed if it touches that part", "err", err)
	}
	f.conn.Write([]byte(msg))
}

func (f *lazyFill) stop() {
	f.stopOnce.Do(func() {
		f.stopped.Store(true)
		liveFills.Delete(f)
		f.uffd.Close() // ends faults, which closes the pidfd (its only user)
		f.conn.Close()
	})
}

func (f *lazyFill) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.firstErr
}

// work fills chunks until none is left to claim.
func (f *lazyFill) work(ctx context.Context) {
	var buf []byte
	for ctx.Err() == nil {
		i, ok := f.take(ctx)
		if !ok {
			return
		}
		buf = f.fill(ctx, i, buf)
	}
}

// take claims the next chunk: one a thread waits for first, then the next in order.
func (f *lazyFill) take(ctx context.Context) (int, bool) {
	for ctx.Err() == nil {
		select {
		case i := <-f.prio:
			if f.state[i].CompareAndSwap(chunkTodo, chunkFilling) {
				return i, true
			}
			continue
		default:
		}
		if lazyHold.Load() {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		i := int(f.next.Add(1) - 1)
		if i >= len(f.chunks) {
			return -1, false
		}
		if f.state[i].CompareAndSwap(chunkTodo, chunkFilling) {
			return i, true
		}
	}
	return -1, false
}

// fill reads chunk i (decoded and verified) and copies it into place, zero-padded to whole pages.
func (f *lazyFill) fill(ctx context.Context, i int, buf []byte) []byte {
	ch := f.chunks[i]
	buf, err := f.r.ReadChunk(ctx, ch.hash, buf[:0])
	if err == nil && int64(len(buf)) != ch.n {
		err = fmt.Errorf("chunk %s: %d bytes, want %d", ch.hash, len(buf), ch.n)
	}
	if err != nil {
		// Ended: the kernel exited (or the server is stopping), nothing waits for the chunk.
		f.lose(i, fmt.Errorf("chunk %s: %w", ch.hash, err), !f.ended(ctx))
		return buf
	}
	if pad := -len(buf) & (f.page - 1); pad > 0 {
		buf = append(buf, make([]byte, pad)...)
	}
	if h := lazyBeforeCopy.Load(); h != nil {
		(*h)()
	}
	if err := f.copyIn(ch.addr, buf); err != nil {
		// ENOENT: the mapping is gone (unmapped by hand: the fill holds the buffers); ESRCH: the
		// process; a closed userfaultfd: the fill ended (the kernel exited while this chunk was
		// read, e.g. hibernated right after its wake). Anything else (ENOMEM: the box's memory
		// limit) is damage: nothing may wait for ever, nor read zeros.
		gone := f.ended(ctx) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH)
		f.lose(i, fmt.Errorf("chunk %s: copying it in: %w", ch.hash, err), !gone)
		return buf
	}
	f.state[i].Store(chunkFilled)
	return buf
}

// ended says whether the fill is over: the kernel exited (ctx is cancelled first, then stop) or the
// server closed the userfaultfd.
func (f *lazyFill) ended(ctx context.Context) bool {
	return ctx.Err() != nil || f.stopped.Load()
}

// copyIn copies src to dst, stepping over pages already present (EEXIST) and partial copies (EAGAIN).
func (f *lazyFill) copyIn(dst uintptr, src []byte) error {
	rc, err := f.uffd.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	ctlErr := rc.Control(func(fd uintptr) {
		for off := 0; off < len(src); {
			n, err := uffdCopy(int(fd), dst+uintptr(off), src[off:])
			off += int(n)
			switch {
			case err == nil:
			case errors.Is(err, unix.EAGAIN):
				if n == 0 { // the process's mappings are changing
					time.Sleep(time.Millisecond)
				}
			case errors.Is(err, unix.EEXIST):
				off += f.page
			default:
				cerr = err
				return
			}
		}
	})
	return errors.Join(ctlErr, cerr)
}

// lose marks chunk i gone, or damaged with its error kept.
func (f *lazyFill) lose(i int, err error, damaged bool) {
	if !damaged {
		f.state[i].Store(chunkGone)
		return
	}
	f.mu.Lock()
	if f.firstErr == nil {
		f.firstErr = err
	}
	f.mu.Unlock()
	f.state[i].Store(chunkDamaged)
	// A thread that faulted while the chunk was being filled waits for a copy that will not come:
	// woken, it faults again and finds the chunk damaged.
	ch := f.chunks[i]
	if rc, e := f.uffd.SyscallConn(); e == nil {
		rc.Control(func(fd uintptr) { uffdWake(int(fd), ch.addr, int(ch.n)+(-int(ch.n)&(f.page-1))) })
	}
}

// faults reads the kernel's page faults until the userfaultfd is closed.
func (f *lazyFill) faults() {
	defer func() {
		if f.pidfd >= 0 {
			unix.Close(f.pidfd)
		}
	}()
	msg := make([]byte, uffdMsgSize*64)
	for {
		n, err := f.uffd.Read(msg)
		if err != nil {
			return
		}
		for o := 0; o+uffdMsgSize <= n; o += uffdMsgSize {
			if msg[o] == uffdEventFault {
				addr := uintptr(binary.LittleEndian.Uint64(msg[o+16:]))
				f.fault(addr &^ uintptr(f.page-1))
			}
		}
	}
}

// fault answers a thread waiting on page addr: its chunk jumps the queue; a page of a chunk already
// filled was discarded since (madvise) and reads as zeros; a chunk being filled wakes it when done.
func (f *lazyFill) fault(addr uintptr) {
	if lazyDeaf.Load() {
		return
	}
	i := f.find(addr)
	st := chunkFilled
	if i >= 0 {
		st = f.state[i].Load()
	}
	switch st {
	case chunkTodo:
		select {
		case f.prio <- i:
		default: // the queue is full: its turn in order comes
		}
	case chunkFilled:
		if rc, err := f.uffd.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { uffdZero(int(fd), addr, f.page) })
		}
	case chunkDamaged:
		// The page cannot hold what was saved. Poisoning it (SIGBUS) is refused over the
		// write-protect marker the page carries, and waking the thread would have it read zeros or
		// fault again for ever: the kernel is killed, as a SIGBUS would, and the log says why.
		if f.pidfd >= 0 {
			unix.PidfdSendSignal(f.pidfd, unix.SIGKILL, nil, 0)
		}
		slog.Error("lazy restore: the kernel touched a chunk that could not be filled; killed", "err", f.err())
	case chunkGone:
		if rc, err := f.uffd.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { uffdWake(int(fd), addr, f.page) })
		}
	}
}

// find is the chunk holding addr, or -1.
func (f *lazyFill) find(addr uintptr) int {
	k := sort.Search(len(f.byAddr), func(k int) bool {
		ch := f.chunks[f.byAddr[k]]
		return ch.addr+uintptr(ch.n) > addr
	})
	if k == len(f.byAddr) {
		return -1
	}
	i := f.byAddr[k]
	if f.chunks[i].addr > addr {
		return -1
	}
	return i
}

// peerPidfd is a pidfd of the process at the other end of conn (the kernel), or -1.
func peerPidfd(conn *net.UnixConn) int {
	rc, err := conn.SyscallConn()
	if err != nil {
		return -1
	}
	pidfd := -1
	rc.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err == nil && cred.Pid > 0 {
			if p, err := unix.PidfdOpen(int(cred.Pid), 0); err == nil {
				pidfd = p
			}
		}
	})
	return pidfd
}
