// Package session is carryover's session service: it owns the sessions (their documents, kernels,
// run locks and streams), composes kernels (kernel/) with checkpoints (persistence/) over the store
// interfaces of the domain package, and is what every front door calls. It takes plain values
// (Config, built by the assembly), never the config loader.
//
// Two types, as jupyter_client's MultiKernelManager and KernelManager: the Service is the registry
// (create, list, delete, fork, import), the lifecycle by id, recovery, cluster adoption and the
// node's admission; Service.Session(id) hands out a Session, the handle of one session, which
// carries its lock, its kernel, its stream and its turns (Run, RunCommand, RunRaw, ...).
//
// Files: service.go (the service and a session's live state), config.go (what it needs of the
// configuration), lifecycle.go (create, start, pause, resume, stop, cancel, heartbeat, reattach),
// turn.go (the pipeline every run and shell command goes through), run.go (a turn that runs a cell:
// Run) with run_cell.go (one cell with a deadline), package collect (the answer) and run_active.go
// (the run as clients see it), command.go (a turn that runs a shell command: RunCommand),
// ephemeral.go (a cell in a throwaway kernel: RunEphemeral; ephemeral_keyed.go under an idempotency
// key), kernels.go (a session's kernel: claim, prepare, restore, death, checkpoint), setup.go (a
// set-up riding on the first cell), control.go (interrupt, restart), context.go, checkpoints.go,
// complete.go, tools.go, variables.go and datarows.go (the inspector and the data viewer),
// notebook.go (package nbformat converts), skills.go (package skills keeps them), rotate.go and
// background.go (rotation, idle hibernation, cost sampling), budget.go and cost.go, usage.go (a
// session's usage: CPU, memory peak, stored bytes), files.go (a session's workspace for the files
// API, package workspace), diskheal.go (a workspace disk a full host failed, repaired before
// the next turn by package kernels), fork.go and fork_many.go, requests.go (the requests that make a session,
// package sessiondoc), stream.go (attaching subscribers to a session's stream, package stream),
// records.go (events, executions and tools for front doors), tenant.go (which tenant sees which
// session), cluster.go, list_cluster.go and handover.go (a node of a cluster: adopt, evict, list,
// hand over while draining), jupyter.go (a Jupyter client's execute_request as a turn, RunRaw, on
// package rawexec, and its other shell messages in the same line, SendInLine), comm_relay.go (the
// UI's widgets: comm messages relayed over the session's stream; kernel.CommSet names the comms a
// replaced kernel lost), widget_sync.go (the kernel's live widgets sent to a page that connects or
// after a restore), widget_checkpoint.go (a widget moved on a page saved without a cell),
// capacity.go (the one claim of a kernel, takeKernel, on a lease of the node's ledger, package
// capacity), capacity_evict.go (hibernating the least recently used idle session),
// capacity_memory.go (the memory pressure watch), capacity_status.go (GET /api/status on package
// nodewatch, each session's share of the per-tenant metrics), ended.go (processes ended with a
// kernel, named in the event and kept for the next answer), capacity_cluster.go (a cluster node's
// load), quota.go (what package quota counts from), idempotency.go (keyed turns on package
// idempotency), portable.go and portable_events.go (a session exported and imported as an archive,
// package archive).
//
// Its packages, each importing nothing of this one: fifo (the run lock that serves in arrival
// order), stream (the frames, the subscribers' bounded queues, the hub, the comm relay's frames),
// workspace (the files API of a workspace directory), rawexec (the Jupyter wire side of an
// execute_request), agentops (the in-kernel agent's operations besides checkpoints), metrics (the
// service's metrics, the bounded per-tenant collector), shellcmd (an exec request and answer, its
// argv, its text, its capped output), nodewatch (the node's watch and the shape of GET
// /api/status), fidelity (what the next answer tells of what was not carried over: processes ended
// with a kernel, the last restore's report), cost (the cost model: a kernel's meter), kernels (the
// Factory: the pool, the launch options, a kernel attached to its session, the workspaces' disks),
// collect (a run's answer from its outputs, within run.max_output_bytes), sessiondoc (a new
// session's document from a create request, a fork or an archive, and those requests), comms (a
// client's comm message, the kernel's live widgets as frames), skills, nbformat.
//
// Unit tests run without a kernel on the fakes of package mock (service_helper_test.go).
package session
