// Package storetest is the one contract suite every carryover.Store backend runs, the way litestream's
// replica client tests run against every replica type: what store.go promises (codes of errors,
// orders, gapless sequences, all-or-nothing chunk puts and commits, GC never racing an open
// checkpoint) is checked here once, not per backend.
//
// A backend's test calls RunStoreTests with a function that opens a new, empty store:
//
//	func TestStore(t *testing.T) {
//		storetest.RunStoreTests(t, func(t *testing.T) carryover.Store {
//			s, err := sqlite.Open(filepath.Join(t.TempDir(), "carryover.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/carryover/carryover"
)

// RunStoreTests runs every contract test as a subtest, each on a store of its own from open (the
// suite closes it when the subtest ends).
func RunStoreTests(t *testing.T, open func(t *testing.T) carryover.Store) {
	runTests(t, open, append(recordTests(), []storeTest{
		{"ChunksPutAndRead", testChunksPutAndRead},
		{"ChunksRefused", testChunksRefused},
		{"ChunksPutConcurrently", testChunksPutConcurrently},
		{"CheckpointCommit", testCheckpointCommit},
		{"CheckpointCommitAtomic", testCheckpointCommitAtomic},
		{"CheckpointManyRoots", testCheckpointManyRoots},
		{"CheckpointListAndPrune", testCheckpointListAndPrune},
		{"CheckpointHeads", testCheckpointHeads},
		{"DeleteSessionRemovesEverything", testDeleteSession},
		{"GCFollowsDescriptors", testGCFollowsDescriptors},
		{"GCSparesOpenWriter", testGCSparesOpenWriter},
		{"GCRacingCommits", testGCRacingCommits},
	}...))
}

// RunRecordStoreTests runs the contract tests of what a store keeps besides checkpoints and chunks
// (sessions, events, executions, tools, skills, keys): the part mock.Store fakes, so the fake the session
// service's unit tests run on answers as the real backends do.
func RunRecordStoreTests(t *testing.T, open func(t *testing.T) carryover.Store) {
	runTests(t, open, recordTests())
}

type storeTest struct {
	name string
	fn   func(t *testing.T, s carryover.Store)
}

func recordTests() []storeTest {
	return []storeTest{
		{"SessionsCRUD", testSessionsCRUD},
		{"SessionsZeroTimes", testSessionsZeroTimes},
		{"EventsGaplessUnderConcurrentAppends", testEventsGapless},
		{"EventsListing", testEventsListing},
		{"Executions", testExecutions},
		{"Tools", testTools},
		{"Skills", testSkills},
		{"Keys", testKeys},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"IdempotencyConcurrentReservations", testIdempotencyConcurrentReservations},
		{"EphemeralKeys", testEphemeralKeys},
	}
}

func runTests(t *testing.T, open func(t *testing.T) carryover.Store, tests []storeTest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// wantCode fails unless err is a carryover error of code c (errors.Is on the code's target).
func wantCode(t *testing.T, what string, err error, c carryover.Code) {
	t.Helper()
	target := &carryover.Error{Code: c}
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v, want an error of code %s", what, err, c)
	}
}

// session creates session id with a small document.
func session(t *testing.T, s carryover.SessionStore, id string) {
	t.Helper()
	r := carryover.SessionRecord{ID: id, State: carryover.StateRunning, Doc: []byte(`{"id":"` + id + `"}`)}
	if err := s.CreateSession(context.Background(), r); err != nil {
		t.Fatalf("create session %s: %v", id, err)
	}
}
