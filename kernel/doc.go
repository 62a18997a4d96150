// Package kernel launches IPython kernels and talks to them over the Jupyter ZMQ protocol (v5.3):
// kernelspecs (spec.go), connection files (connection.go), the provisioner seam that decides where a
// kernel process runs (provisioner.go; kernel/sandbox implements it with bubblewrap), the local
// provisioner: a private process group with a controlled environment (local.go, process.go), the
// signed wire format (wire.go), the five channels (channels.go), one process's lifetime and message
// routing (instance.go), execute (execute.go), interrupt/restart/shutdown (control.go), heartbeat
// (heartbeat.go), complete/inspect (requests.go), the raw message path for proxies (raw.go), /proc
// figures (stats.go), a pool of warm kernels (pool.go), the comms open in a kernel as a front door
// sees them go by (comms.go) and a request the kernel answered "aborted" sent again (aborted.go).
//
// It knows nothing of sessions, SQLite or HTTP.
//
// # What go-zeromq/zmq4 v0.17 needs worked around
//
//   - Dial retries 10 x 250 ms by default: sockets dial with a 5 ms retry until the start deadline,
//     all five in parallel, and a dial stuck in the ZMTP handshake (zmq4 sets no deadline there) is
//     abandoned after a second rather than hanging Start.
//   - Send returns nil when no peer is connected: a dead kernel is detected from the process exit
//     (cmd.Wait, immediate) and the heartbeat, never from send errors.
//   - Received messages pass through a 10-slot channel with no high-water mark: every socket has its
//     own reader goroutine that only verifies, decodes and queues (unbounded, per call) and moves on.
//     A connection goroutine that still holds a message when its socket closes blocks forever, so
//     sockets are closed only after the kernel exited and each reader consumed its connection's
//     final error.
//   - REQ with reconnects can deadlock: the heartbeat is a DEALER.
//   - Socket.Send writes every frame header and body with separate write calls (twelve packets per
//     Jupyter message with TCP_NODELAY on); SendMulti gathers them into one writev, so only
//     SendMulti is used.
//   - TCP_NODELAY: zmq4 leaves it to Go, whose TCPConn enables it; a test checks our live sockets.
//
// And ipykernel 6.17 publishes iopub on a plain PUB socket without announcing subscriptions, so
// readiness waits for an iopub message, repeating kernel_info_request until one arrives.
package kernel
