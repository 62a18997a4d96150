package persistence

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover"
)

// sharedRef says buffer J of a group is the agent's shared mapping ID (the agent's shared.py).
type sharedRef struct {
	J  int `json:"j"`
	ID int `json:"id"`
}

// startShared gets each buffer's node-wide copy (filling the ones no kernel holds) and has the agent
// map them copy-on-write (its "shared_map" call, the memfds handed over a unix socket in the
// spool). The socket stays open until the kernel exits, which releases the kernel's references. On
// an error nothing is mapped for the restore to use: the caller reads those buffers otherwise.
func (c *Checkpointer) startShared(ctx context.Context, ex Executor, hostDir, kernDir string, bufs []lazyBuf) error {
	held := make([]*sharedBuf, 0, len(bufs))
	releaseAll := func() {
		for _, b := range held {
			c.Shared.release(b)
		}
	}
	for _, b := range bufs {
		sb, err := c.Shared.acquire(ctx, c.Store, b.chunks, b.n)
		if err != nil {
			releaseAll()
			return err
		}
		held = append(held, sb)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(hostDir, "shared.sock"), Net: "unix"})
	if err != nil {
		releaseAll()
		return fmt.Errorf("shared buffers: %w", err)
	}
	defer ln.Close()
	got := make(chan *net.UnixConn, 1)
	go func() { got <- handMemfds(ln, held) }()
	want := make([]map[string]any, len(bufs))
	for i, b := range bufs {
		want[i] = map[string]any{"id": i, "n": b.n}
	}
	var ans struct {
		OK bool `json:"ok"`
	}
	callErr := callAgent(ctx, ex, "shared_map", map[string]any{"sock": filepath.Join(kernDir, "shared.sock"), "bufs": want}, &ans)
	ln.Close() // unblocks an accept the agent never made
	conn := <-got
	if callErr == nil && (conn == nil || !ans.OK) {
		callErr = errors.New("the agent did not take the buffers")
	}
	if callErr != nil {
		if conn != nil {
			conn.Close()
		}
		releaseAll()
		return fmt.Errorf("shared buffers: %w", callErr)
	}
	go func() { // the agent's end closes when its last mapping goes or the kernel exits
		buf := make([]byte, 64)
		for {
			if _, err := conn.Read(buf); err != nil {
				break
			}
		}
		conn.Close()
		releaseAll()
	}()
	return nil
}

// handMemfds accepts the agent's connection and sends it the copies' descriptors, in order, at
// most maxRights a message. It returns the connection, or nil when the hand-off failed.
func handMemfds(ln *net.UnixListener, bufs []*sharedBuf) *net.UnixConn {
	if err := ln.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return nil
	}
	conn, err := ln.AcceptUnix()
	if err != nil {
		return nil
	}
	for i := 0; i < len(bufs); i += maxRights {
		fds := make([]int, 0, maxRights)
		for _, b := range bufs[i:min(i+maxRights, len(bufs))] {
			fds = append(fds, int(b.f.Fd()))
		}
		if _, _, err := conn.WriteMsgUnix([]byte{'M'}, unix.UnixRights(fds...), nil); err != nil {
			conn.Close()
			return nil
		}
	}
	return conn
}

// maxRights is how many descriptors one message carries (Linux's SCM_MAX_FD is 253).
const maxRights = 200

// shares reports whether buffer b is restored from the node's shared copy: sharing is on, b is
// large, and the restore is a fork child's (share) or a kernel holds a copy of b already.
func (c *Checkpointer) shares(b descBuffer, share bool) bool {
	if c.Shared == nil || !sharedEligible(b) {
		return false
	}
	return share || c.Shared.has(sharedKey(b.Chunks))
}

// mapShared has the kernel map the shared buffers (startShared) and points the groups at them,
// dropping the jobs that would have assembled them; when it cannot, res says why and the buffers
// are assembled as files.
func (c *Checkpointer) mapShared(ctx context.Context, ex Executor, hostDir, kernDir string, groups []restoreGroup, jobs []assembleJob,
	sbufs []lazyBuf, res *carryover.RestoreResult) ([]restoreGroup, []assembleJob) {
	if len(sbufs) == 0 {
		return groups, jobs
	}
	if err := c.startShared(ctx, ex, hostDir, kernDir, sbufs); err != nil {
		res.Timings.SharedOff = err.Error()
		return groups, jobs
	}
	for id, b := range sbufs {
		g := &groups[b.group]
		g.unfile(b.j)
		g.SharedBufs = append(g.SharedBufs, sharedRef{J: b.j, ID: id})
		res.Timings.SharedBytes += b.n
	}
	kept := jobs[:0]
	for _, j := range jobs {
		if j.lazy >= 0 {
			kept = append(kept, j)
		}
	}
	return groups, kept
}
