package kernel

// instance.go is one incarnation of a kernel: one process, one connection file, one set of sockets.
// Restart replaces the instance of a *Kernel; calls in flight on the old one fail with ErrDied.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type instance struct {
	k        *Kernel
	conn     ConnectionInfo
	connFile string
	sess     *session
	proc     KernelProcess
	socks    *sockets
	started  time.Time
	info     KernelInfo

	mu      sync.Mutex
	pending map[string]*waiter // by our request msg_id

	iopubSeen chan struct{} // closed on the first valid iopub message: our subscription is live
	iopubOnce sync.Once

	lastPong atomic.Int64 // unix nanos of the last heartbeat echo
	busy     atomic.Bool  // the kernel's last iopub status was busy (noteStatus)

	dead     chan struct{} // closed by die
	deadOnce sync.Once
	err      *DiedError // set before dead is closed

	wg sync.WaitGroup // reader and heartbeat goroutines
}

// startInstance writes a connection file, has the provisioner launch the kernel (prev: the process
// it replaces, on Restart) and waits until it is ready: a kernel_info_reply on shell and at least one
// iopub message. On any failure the process is killed and cleaned up, and the error carries the
// kernel log tail.
func (k *Kernel) startInstance(ctx context.Context, prev KernelProcess) (*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, k.opts.StartupTimeout)
	defer cancel()

	ci, err := newConnectionInfo(k.opts.Transport, k.dir, k.opts.Spec.Name)
	if err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	connFile := filepath.Join(k.dir, "connection.json")
	if err := ci.write(connFile); err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	started := time.Now()
	proc, err := k.opts.Provisioner.Launch(ctx, LaunchSpec{
		Argv:         k.opts.Spec.argv(connFile),
		Env:          mergeEnv(k.opts.Spec.Env, k.opts.Env),
		Dir:          k.opts.WorkDir,
		RuntimeDir:   k.dir,
		LogPath:      k.opts.LogPath,
		Network:      k.opts.Network,
		NetworkAllow: k.opts.NetworkAllow,
		Fresh:        k.opts.Fresh,
		Previous:     prev,
	})
	if err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	inst := &instance{
		k:         k,
		conn:      ci,
		connFile:  connFile,
		sess:      newSession([]byte(ci.Key)),
		proc:      proc,
		started:   started,
		pending:   make(map[string]*waiter),
		iopubSeen: make(chan struct{}),
		dead:      make(chan struct{}),
	}
	go inst.watchExit()
	k.inputs.Add(1) // a new process: whatever was counted before is gone with the old one
	inst.socks = newSockets(inst.sess.id, k.log, &k.inputs)

	if err := inst.socks.dial(ctx, ci, proc.Exited()); err != nil {
		return nil, inst.failStart(prev, err)
	}
	for ch := range numChannels {
		inst.wg.Add(1)
		go func() {
			defer inst.wg.Done()
			inst.socks.readLoop(ch, inst.handle)
		}()
	}
	if err := inst.waitReady(ctx); err != nil {
		return nil, inst.failStart(prev, err)
	}
	inst.startHeartbeat(k.opts.HeartbeatInterval, k.opts.IdleHeartbeatInterval)
	// Ready: the sandbox's wrapper has forked the kernel by now, so the whole tree gets the score.
	if err := RaiseOOMScore(proc.PID(), KernelOOMScoreAdj); err != nil {
		k.log.Warn("kernel oom_score_adj not raised", "pid", proc.PID(), "err", err)
	}
	k.log.Debug("kernel ready", "pid", proc.PID(), "transport", ci.Transport, "took", time.Since(started))
	return inst, nil
}

// failStart undoes a start that failed after the launch (prev: the process a restart replaces) and
// returns err with the process's exit and the kernel log's tail.
func (inst *instance) failStart(prev KernelProcess, err error) error {
	k, proc := inst.k, inst.proc
	exitedEarly := exited(proc)
	inst.die(&DiedError{PID: proc.PID(), ExitCode: -1, Reason: "start failed"})
	proc.Kill()
	inst.teardown()
	// A restart shares what the previous process holds (a sandbox's box, the spool dir): only a
	// first start releases it; the kernel's Shutdown does it otherwise.
	if prev == nil {
		if cerr := proc.Cleanup(); cerr != nil {
			k.log.Warn("start failed: cleanup", "err", cerr)
		}
	}
	detail := ""
	if st := proc.ExitStatus(); exitedEarly && st.Signal != 0 {
		detail = fmt.Sprintf(" (signal %s)", st.SignalName())
	} else if exitedEarly {
		detail = fmt.Sprintf(" (exit code %d)", st.Code)
	}
	return fmt.Errorf("start kernel %s (pid %d)%s: %w; log tail:\n%s", k.opts.Spec.Name, proc.PID(), detail, err, logTail(k.opts.LogPath))
}

var errExitedEarly = errors.New("kernel process exited during startup")

// waitReady nudges the kernel with kernel_info_request until it has both replied on shell and
// delivered something on iopub. ipykernel 6.17 publishes on a plain PUB socket and does not announce
// subscriptions, so iopub messages sent before our subscription took effect are lost: each extra
// kernel_info_request produces a fresh busy/idle pair to prove the subscription.
func (inst *instance) waitReady(ctx context.Context) error {
	w := newWaiter(false)
	var ids []string
	defer func() { inst.unregister(ids...) }()
	nudge := func() error {
		h := inst.sess.newHeader("kernel_info_request")
		ids = append(ids, h.MsgID)
		inst.register(h.MsgID, w)
		frames, err := inst.sess.encode(h, nil, nil)
		if err != nil {
			return err
		}
		return inst.socks.send(chShell, frames)
	}
	if err := nudge(); err != nil {
		return err
	}
	// Before the first reply the kernel is still importing; requests queue in its ROUTER, so one is
	// enough (we resend rarely, in case it was lost). After it, iopub usually follows within a ms.
	const slowNudge, fastNudge = time.Second, 20 * time.Millisecond
	tick := time.NewTicker(slowNudge)
	defer tick.Stop()
	gotReply, gotIOPub := false, false
	iopub := inst.iopubSeen
	var buf []event
	for !gotReply || !gotIOPub {
		select {
		case <-w.notify:
			buf = w.take(buf)
			for _, e := range buf {
				if e.ch != chShell || e.msg.Header.MsgType != "kernel_info_reply" || gotReply {
					continue
				}
				if err := json.Unmarshal(e.msg.Content, &inst.info); err != nil {
					return fmt.Errorf("kernel_info_reply: %w", err)
				}
				gotReply = true
				tick.Reset(fastNudge)
			}
		case <-iopub:
			gotIOPub, iopub = true, nil
		case <-tick.C:
			if err := nudge(); err != nil {
				return err
			}
		case <-inst.proc.Exited():
			return errExitedEarly
		case <-ctx.Done():
			what := "kernel_info_reply"
			if gotReply {
				what = "iopub"
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
	return nil
}

// handle verifies, decodes and routes one received message. It runs on the reader goroutines and
// must stay quick.
func (inst *instance) handle(ch channelKind, frames [][]byte) {
	if ch == chHB {
		inst.lastPong.Store(time.Now().UnixNano())
		return
	}
	m, err := inst.sess.decode(frames)
	if err != nil {
		if errors.Is(err, errBadSignature) {
			n := inst.k.badSigs.Add(1)
			inst.k.log.Warn("dropped a message with a bad signature", "channel", ch.String(), "count", n)
		} else {
			inst.k.log.Warn("dropped a malformed message", "channel", ch.String(), "err", err)
		}
		return
	}
	if ch == chIOPub {
		inst.iopubOnce.Do(func() { close(inst.iopubSeen) })
		inst.noteStatus(m)
	}
	inst.k.publishRaw(ch, m)
	if m.Parent.MsgID == "" {
		return
	}
	inst.mu.Lock()
	w := inst.pending[m.Parent.MsgID]
	inst.mu.Unlock()
	if w == nil || (ch == chIOPub && !w.iopub) {
		return // another client's traffic, or a call that already returned
	}
	w.push(event{ch: ch, msg: m})
}

func (inst *instance) register(id string, w *waiter) {
	inst.mu.Lock()
	inst.pending[id] = w
	inst.mu.Unlock()
}

func (inst *instance) unregister(ids ...string) {
	inst.mu.Lock()
	for _, id := range ids {
		delete(inst.pending, id)
	}
	inst.mu.Unlock()
}

// send encodes and sends a request on ch after registering w for its replies (registering first so
// a fast reply cannot be missed). It returns the request header.
func (inst *instance) send(ch channelKind, msgType string, parent *header, content any, w *waiter) (header, error) {
	return inst.sendWith(ch, msgType, parent, nil, content, w)
}

// sendWith is send with the request's metadata (nil: {}).
func (inst *instance) sendWith(ch channelKind, msgType string, parent *header, metadata map[string]any, content any, w *waiter) (header, error) {
	h, _, err := inst.sendSeq(ch, msgType, parent, metadata, content, w)
	return h, err
}

// sendSeq is sendWith, also returning the kernel's input count with this request (Kernel.Inputs).
func (inst *instance) sendSeq(ch channelKind, msgType string, parent *header, metadata map[string]any, content any, w *waiter) (header, uint64, error) {
	h := inst.sess.newHeader(msgType)
	frames, err := inst.sess.encodeWith(h, parent, metadata, content)
	if err != nil {
		return h, 0, err
	}
	if w != nil {
		inst.register(h.MsgID, w)
	}
	seq, err := inst.socks.sendCounted(ch, frames)
	if err != nil {
		if w != nil {
			inst.unregister(h.MsgID)
		}
		return h, seq, err
	}
	return h, seq, nil
}

// die marks the instance dead, once; the first reason wins.
func (inst *instance) die(d *DiedError) {
	inst.deadOnce.Do(func() {
		inst.err = d
		close(inst.dead)
		inst.k.log.Debug("kernel dead", "pid", d.PID, "reason", d.Reason, "signal", d.Signal, "exit_code", d.ExitCode)
	})
}

// isDead reports whether die was called.
func (inst *instance) isDead() bool {
	select {
	case <-inst.dead:
		return true
	default:
		return false
	}
}

// deadErr returns the death reason (nil while alive).
func (inst *instance) deadErr() error {
	if !inst.isDead() {
		return nil
	}
	return inst.err
}

// settleWait bounds how long a call that saw the kernel die waits for the last messages.
const settleWait = 200 * time.Millisecond

// settle waits (at most settleWait) until the shell and iopub readers reached the end of their
// connections. The exit notice (cmd.Wait) can beat the readers to a crashed kernel's last words; once
// a reader saw its connection's EOF, everything sent before it has been routed.
func (inst *instance) settle() {
	if inst.socks == nil {
		return
	}
	t := time.NewTimer(settleWait)
	defer t.Stop()
	for _, ch := range []channelKind{chShell, chIOPub} {
		select {
		case <-inst.socks.lost[ch]:
		case <-inst.socks.ctx.Done():
			return
		case <-t.C:
			return
		}
	}
}

// watchExit turns the process exit into a death at once: this, not the heartbeat, is what makes an
// Execute return within milliseconds of a kill -9.
func (inst *instance) watchExit() {
	<-inst.proc.Exited()
	st := inst.proc.ExitStatus()
	reason := "process exited"
	if st.Signal != 0 {
		reason = "process killed"
	}
	inst.die(&DiedError{PID: inst.proc.PID(), ExitCode: st.Code, Signal: st.SignalName(), Reason: reason, LogTail: logTail(inst.k.opts.LogPath)})
}

// teardown closes the sockets and waits for the goroutines; the process must be dead (or at least
// SIGKILLed) before. It removes the connection file and ipc socket files.
func (inst *instance) teardown() {
	inst.socks.close(exited(inst.proc))
	inst.wg.Wait()
	inst.conn.removeSockets()
	_ = os.Remove(inst.connFile)
}

// mergeEnv is base overridden by over (the kernelspec's env, then Options.Env).
func mergeEnv(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// launchInstance starts an incarnation. Over tcp the ports are chosen before the kernel binds
// them, and on a busy machine another process can take one in between: the kernel then exits with
// "Address already in use", or our dial meets someone else's socket (a ZMQ socket of another kind,
// or no ZMQ socket at all: the greeting fails, often before the kernel has logged its own bind
// error). Such a start is retried with new ports, up to three times in all.
func (k *Kernel) launchInstance(ctx context.Context, prev KernelProcess) (*instance, error) {
	for attempt := 1; ; attempt++ {
		inst, err := k.startInstance(ctx, prev)
		if err == nil || k.opts.Transport != "tcp" || attempt == 3 || !portTaken(err) || ctx.Err() != nil {
			return inst, err
		}
		k.log.Warn("a kernel port was taken before the kernel bound it; starting again with new ports", "attempt", attempt, "err", err)
	}
}

// portTaken reports whether a failed start looks like a port race (see launchInstance).
func portTaken(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Address already in use") || strings.Contains(s, "not compatible with") ||
		strings.Contains(s, "could not exchange greetings")
}
