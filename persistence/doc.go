// Package persistence is carryover's checkpoint engine: it saves a session's kernel namespace (through
// the in-kernel agent, agent/) and its workspace files as one checkpoint, and puts them back. It speaks
// to storage only through the interfaces of the root package (carryover.CheckpointStore and the chunk
// reader and writer), so any backend that passes persistence/storetest will do; persistence/sqlite is
// the one the server uses.
//
// A checkpoint opens a carryover.CheckpointWriter, puts its chunks through it (the agent's spooled
// namespace chunks, then the workspace files), commits the manifest with its roots, and closes it: the
// writer is what keeps a concurrent GC from collecting chunks put but not yet committed.
//
// Chunks are encoded, addressed and verified by persistence/chunk, shared with the backends.
package persistence
