package carryover

import (
	"context"
	"testing"
)

// TestSyncEachTakesTheDeferMarkAway: another session's work inside a turn (SyncEach) commits
// durably one by one again, whatever the turn's context said.
func TestSyncEachTakesTheDeferMarkAway(t *testing.T) {
	ctx := context.Background()
	if SyncDeferred(ctx) {
		t.Fatal("a plain context is deferred")
	}
	turn := DeferSync(ctx)
	if !SyncDeferred(turn) {
		t.Fatal("DeferSync's context is not deferred")
	}
	if SyncDeferred(SyncEach(turn)) {
		t.Fatal("SyncEach's context is still deferred")
	}
	if !SyncDeferred(DeferSync(SyncEach(turn))) {
		t.Fatal("DeferSync after SyncEach is not deferred")
	}
}
