// Package archive reads and writes a session archive: one self-contained file holding a checkpoint
// of a session (its manifest, every chunk the manifest reaches once, the session's settings), so the
// session can be imported into another store on another server (docs/export-format.md is the
// format's reference).
//
// It is written against the store interfaces only (carryover.ChunkReader to export,
// carryover.CheckpointStore to import) and streams both ways: one chunk at a time is in memory, so
// a 1 GiB session never needs 1 GiB of memory.
//
// An archive is untrusted input. Read verifies all of it (sizes, digests, the chunk graph, file
// paths, versions) while it stages the chunks through one CheckpointWriter, and nothing is committed
// until the whole archive has been read and checked: Staged.Commit then makes the checkpoint in one
// transaction. A refused archive leaves no checkpoint and no session, only unreferenced chunks that
// the next GC collects; chunks the store already holds are verified but not written again.
package archive
