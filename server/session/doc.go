// Package session is carryover's session service: it owns the sessions (their documents, kernels,
// run locks and streams), composes kernels (kernel/) with checkpoints (persistence/) over the store
// interfaces of the domain package, and is what every front door calls.
//
// Files: service.go (the service and a session's live state), lifecycle.go (create, start, pause,
// resume, stop, cancel, heartbeat, reattach), turn.go (the pipeline every run and exec goes
// through), run.go (running cells), exec.go (shell commands), kernels.go (a session's kernel:
// claim, prepare, restore, death, checkpoint), rotate.go and background.go (rotation, idle
// hibernation, cost sampling), budget.go and cost.go, ops.go (context, interrupt, restart,
// checkpoints, tools), files.go, stream.go/hub.go/frames.go (what subscribers receive), records.go
// (events, executions and tools for front doors).
package session
