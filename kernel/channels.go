package kernel

// channels.go holds the five zmq4 sockets of one kernel process and the goroutines that drain them.
//
// zmq4 v0.17 hands received messages over a 10-slot channel with no high-water mark and no way to
// drop, and Send silently succeeds with no peer. So every socket gets its own reader goroutine that
// never blocks for long: it verifies, decodes and pushes each message onto the unbounded queue of
// the call waiting for that parent msg_id (a waiter), and moves on.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

type channelKind uint8

const (
	chShell channelKind = iota
	chControl
	chStdin
	chIOPub
	chHB
	numChannels
)

var channelNames = [numChannels]string{"shell", "control", "stdin", "iopub", "hb"}

func (c channelKind) String() string { return channelNames[c] }

// event is one routed message and the channel it came from.
type event struct {
	ch  channelKind
	msg *message
}

// waiter collects the messages whose parent is one of our requests. The readers push without ever
// blocking (the queue is unbounded: outputs are never dropped); the caller drains in order.
type waiter struct {
	iopub  bool // also wants the iopub messages of this parent (executes do, completes do not)
	mu     sync.Mutex
	queue  []event
	notify chan struct{} // 1-slot doorbell: "the queue is not empty"
}

func newWaiter(iopub bool) *waiter {
	return &waiter{iopub: iopub, notify: make(chan struct{}, 1)}
}

func (w *waiter) push(e event) {
	w.mu.Lock()
	w.queue = append(w.queue, e)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// take swaps the queue out, reusing buf's storage for the next round.
func (w *waiter) take(buf []event) []event {
	clear(buf) // drop references to delivered messages (they can be 50 MB each)
	w.mu.Lock()
	q := w.queue
	w.queue = buf[:0]
	w.mu.Unlock()
	return q
}

// sockets are the five channels of one kernel process.
type sockets struct {
	ctx    context.Context // the life-line of all five; cancelled by close
	cancel context.CancelFunc
	socks  [numChannels]zmq4.Socket
	dialed [numChannels]atomic.Bool
	lost   [numChannels]chan struct{} // closed when the connection of that socket broke (peer gone)
	// inputs counts the sends to the kernel, heartbeats aside (Kernel.Inputs); inflight is how many
	// are being sent now (under countMu), so a count is handed out only when it is exact.
	countMu  sync.Mutex
	inflight int
	inputs   *atomic.Uint64
	// sent is signalled (wake, never blocking) at every send but a heartbeat's and when the kernel
	// turns busy: the heartbeat of an idle kernel then goes back to its working pace (startHeartbeat).
	sent chan struct{}
}

// dialRetry is how often a socket retries connecting to a kernel that has not bound yet. zmq4's
// default (10 x 250 ms) would add up to 250 ms to every start; we retry fast until the start deadline.
const dialRetry = 5 * time.Millisecond

func newSockets(identity string, logger *slog.Logger, inputs *atomic.Uint64) *sockets {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sockets{ctx: ctx, cancel: cancel, inputs: inputs, sent: make(chan struct{}, 1)}
	zlog := slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	common := []zmq4.Option{
		zmq4.WithDialerRetry(dialRetry),
		zmq4.WithDialerMaxRetries(-1), // until close: the start deadline is ours, not zmq4's
		zmq4.WithLogger(zlog),
	}
	// shell and stdin share one routing identity: the kernel sends input_request to the identity
	// that sent the execute_request.
	shared := append(append([]zmq4.Option{}, common...), zmq4.WithID(zmq4.SocketIdentity(identity)))
	s.socks[chShell] = zmq4.NewDealer(ctx, shared...)
	s.socks[chStdin] = zmq4.NewDealer(ctx, shared...)
	s.socks[chControl] = zmq4.NewDealer(ctx, common...)
	s.socks[chIOPub] = zmq4.NewSub(ctx, common...)
	// A DEALER, not a REQ: REQ's strict send/recv alternation deadlocks after a lost reply.
	s.socks[chHB] = zmq4.NewDealer(ctx, common...)
	for i := range s.lost {
		s.lost[i] = make(chan struct{})
	}
	return s
}

// dial connects all five sockets in parallel. It returns when all are connected, or with an error
// when ctx ends or abort is closed (the kernel process exited) first; then it closes the sockets so
// the pending Dials give up (zmq4's Dial only checks its socket's own context).
func (s *sockets) dial(ctx context.Context, ci ConnectionInfo, abort <-chan struct{}) error {
	// Subscribe before dialing: zmq4 sends known topics when a connection is added.
	if err := s.socks[chIOPub].SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return fmt.Errorf("subscribe iopub: %w", err)
	}
	ports := [numChannels]int{ci.ShellPort, ci.ControlPort, ci.StdinPort, ci.IOPubPort, ci.HBPort}
	errs := make(chan error, numChannels)
	for i := range numChannels {
		go func() {
			ep := ci.endpoint(ports[i])
			if err := s.socks[i].Dial(ep); err != nil {
				errs <- fmt.Errorf("dial %s %s: %w", i, ep, err)
				return
			}
			s.dialed[i].Store(true)
			errs <- nil
		}()
	}
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
			s.cancel()
		}
	}
	done := ctx.Done()
	var giveUp <-chan time.Time
	for pending := int(numChannels); pending > 0; {
		select {
		case err := <-errs:
			pending--
			if err != nil {
				fail(err)
			}
		case <-done:
			fail(fmt.Errorf("connect: %w", ctx.Err()))
		case <-abort:
			fail(errors.New("connect: kernel process exited"))
		case <-giveUp:
			// A Dial stuck in the ZMTP handshake (zmq4 sets no deadline there: a silent non-ZMQ
			// listener on a stolen tcp port) must not hang the start; its goroutine ends when that
			// peer closes.
			return first
		}
		if first != nil && giveUp == nil {
			done, abort = nil, nil
			giveUp = time.After(time.Second)
		}
	}
	return first
}

// markLost records that the connection of ch broke.
func (s *sockets) markLost(ch channelKind) {
	select {
	case <-s.lost[ch]:
	default:
		close(s.lost[ch])
	}
}

// close shuts the sockets. When the kernel process is gone it first waits (bounded) until every
// reader has consumed its connection's final error: a zmq4 connection goroutine that still has a
// message to hand over when the socket closes blocks forever.
func (s *sockets) close(processGone bool) {
	if processGone {
		deadline := time.NewTimer(time.Second)
	wait:
		for i := range numChannels {
			if !s.dialed[i].Load() {
				continue
			}
			select {
			case <-s.lost[i]:
			case <-deadline.C:
				break wait
			}
		}
		deadline.Stop()
	}
	s.cancel()
	for _, sk := range s.socks {
		_ = sk.Close()
	}
}

func (s *sockets) send(ch channelKind, frames [][]byte) error {
	_, err := s.sendCounted(ch, frames)
	return err
}

// sendCounted sends frames on ch and returns the kernel's input count with this message: every
// message but a heartbeat counts, even one whose send failed (it may have left). The count is 0
// (unknown) when another message was being sent at the same moment: that one may reach the kernel
// after this one although it was counted before, so no count could say "nothing came after".
// Sends are not serialised for it (a send to a stopped kernel may block; an interrupt must not
// wait behind it).
func (s *sockets) sendCounted(ch channelKind, frames [][]byte) (uint64, error) {
	if ch == chHB {
		return 0, s.sendNow(ch, frames)
	}
	s.countMu.Lock()
	n := s.inputs.Add(1)
	if s.inflight > 0 {
		n = 0
	}
	s.inflight++
	s.countMu.Unlock()
	s.wake()
	err := s.sendNow(ch, frames)
	s.countMu.Lock()
	s.inflight--
	s.countMu.Unlock()
	return n, err
}

// wake tells the heartbeat that work arrived (sent), never blocking.
func (s *sockets) wake() {
	select {
	case s.sent <- struct{}{}:
	default:
	}
}

func (s *sockets) sendNow(ch channelKind, frames [][]byte) error {
	if err := s.socks[ch].SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
		return fmt.Errorf("send on %s: %w", ch, err)
	}
	return nil
}

// readLoop drains one socket until the sockets are closed, passing each message to handle. A broken
// connection (the kernel died) is recorded and the loop keeps waiting for close.
func (s *sockets) readLoop(ch channelKind, handle func(channelKind, [][]byte)) {
	sk := s.socks[ch]
	errs := 0
	for {
		msg, err := sk.Recv()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.markLost(ch)
			if errs++; errs > 100 { // never spin: zmq4 reports one error per lost connection
				<-s.ctx.Done()
				return
			}
			continue
		}
		errs = 0
		handle(ch, msg.Frames)
	}
}
