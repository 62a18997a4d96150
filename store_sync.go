package carryover

import "context"

// A turn writes several records (its checkpoint, the session, its history entry, ...), and each
// write a store commits durably costs a flush to disk: on SQLite with synchronous=full one
// fdatasync of the WAL per commit, ~8 per `1+1` turn and most of its time. A turn needs them durable
// before it answers, not one by one: the service marks the turn's context with DeferSync, the
// store commits those writes without flushing, and the turn calls Syncer.Sync once before its
// answer leaves. What Sync returns nil for is durable, as if each commit had flushed.

type deferSyncKey struct{}

// DeferSync returns ctx marked so that a Syncer store commits writes made under it without waiting
// for the disk; the caller must call Sync before it answers anyone about them. A store that is not a
// Syncer ignores the mark (its commits stay durable one by one).
func DeferSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferSyncKey{}, true)
}

// SyncEach returns ctx without DeferSync's mark: writes made under it are durable one by one again.
// For another session's work done inside a turn (a session hibernated to free the node's slot a
// claim waits for): its writes must not wait for this turn's Sync, which a failed claim may reach
// only after that session's kernel is gone.
func SyncEach(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferSyncKey{}, false)
}

// SyncDeferred reports whether ctx carries DeferSync's mark.
func SyncDeferred(ctx context.Context) bool {
	v, _ := ctx.Value(deferSyncKey{}).(bool)
	return v
}

// Syncer is a store whose commits can be flushed to disk in one go: Sync returns once every write
// committed before it was called (deferred or not) is durable.
type Syncer interface {
	Sync(ctx context.Context) error
}

// PruningWriter is a CheckpointWriter that prunes in its commit's own transaction: CommitPruning is
// Commit(cp) then CheckpointStore.Prune(cp.SessionID, keep), atomically, one commit instead of two.
// The checkpoint engine uses it when the writer has it, else calls Prune after Commit.
type PruningWriter interface {
	CommitPruning(ctx context.Context, cp Checkpoint, keep int) (pruned int, err error)
}

// CheckpointHeads is a CheckpointStore that names a session's newest checkpoint without reading it
// (its manifest and roots). Before each turn's snapshot the checkpoint engine asks whether the one it
// last committed for the session is still the newest, and reads and parses the manifest again only
// when not: a workspace of 10,000 files made that read a 1.5 MB manifest on every turn.
type CheckpointHeads interface {
	// LatestCheckpointID is the id of the session's newest checkpoint, "" when it has none.
	LatestCheckpointID(ctx context.Context, sessionID string) (string, error)
}
