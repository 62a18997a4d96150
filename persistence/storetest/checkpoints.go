package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// commit puts data as the root chunk of checkpoint cp and commits it through a writer of its own.
func commit(t *testing.T, s carryover.CheckpointStore, cp carryover.Checkpoint, data []byte) {
	t.Helper()
	w := begin(t, s)
	defer w.Close()
	cp.Roots = append(cp.Roots, putRaw(t, w, data))
	if err := w.Commit(context.Background(), cp); err != nil {
		t.Fatalf("commit %s: %v", cp.ID, err)
	}
}

// testCheckpointCommit: a committed checkpoint comes back whole; ids are unique, sessions must exist.
func testCheckpointCommit(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	_, err := s.LatestCheckpoint(ctx, "a")
	wantCode(t, "latest of a session without checkpoints", err, carryover.CodeNotFound)
	w := begin(t, s)
	r1, r2 := putRaw(t, w, []byte("one")), putRaw(t, w, []byte("two"))
	cp := carryover.Checkpoint{ID: "c1", SessionID: "a", Turn: 1, ParentID: "c0", Manifest: []byte(`{"v":1}`), Bytes: 6, Roots: []string{r2, r1}}
	if err := w.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCheckpoint(ctx, "a", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Turn != 1 || got.SessionID != "a" || got.ParentID != "c0" || string(got.Manifest) != `{"v":1}` || got.Bytes != 6 ||
		fmt.Sprint(got.Roots) != fmt.Sprint([]string{r2, r1}) || got.CreatedAt.IsZero() {
		t.Fatalf("got %+v", got)
	}
	wantCode(t, "commit of a taken id", w.Commit(ctx, cp), carryover.CodeConflict)
	wantCode(t, "commit to a missing session", w.Commit(ctx, carryover.Checkpoint{ID: "cx", SessionID: "nope", Roots: []string{r1}}),
		carryover.CodeNotFound)
	w.Close()
	_, err = s.GetCheckpoint(ctx, "other", "c1")
	wantCode(t, "checkpoint of another session", err, carryover.CodeNotFound)
	_, err = s.GetCheckpoint(ctx, "a", "nope")
	wantCode(t, "unknown checkpoint", err, carryover.CodeNotFound)
}

// testCheckpointCommitAtomic: a commit naming a root that is not stored fails with ErrMissingChunk and
// leaves nothing: the previous checkpoint stays the latest.
func testCheckpointCommitAtomic(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	commit(t, s, carryover.Checkpoint{ID: "c1", SessionID: "a", Turn: 1}, []byte("one"))
	w := begin(t, s)
	r := putRaw(t, w, []byte("two"))
	absent := chunk.Hash([]byte("never stored"))
	err := w.Commit(ctx, carryover.Checkpoint{ID: "c2", SessionID: "a", Turn: 2, ParentID: "c1", Roots: []string{r, absent}})
	if !errors.Is(err, carryover.ErrMissingChunk) {
		t.Fatalf("commit with a missing root: %v, want ErrMissingChunk", err)
	}
	w.Close()
	_, err = s.GetCheckpoint(ctx, "a", "c2")
	wantCode(t, "the failed checkpoint", err, carryover.CodeNotFound)
	if latest, err := s.LatestCheckpoint(ctx, "a"); err != nil || latest.ID != "c1" || latest.Turn != 1 || len(latest.Roots) != 1 {
		t.Fatalf("latest after a failed commit: %+v %v", latest, err)
	}
	if list, err := s.ListCheckpoints(ctx, "a"); err != nil || len(list) != 1 {
		t.Fatalf("list after a failed commit: %+v %v", list, err)
	}
}

// testCheckpointListAndPrune: newest first; Prune keeps the newest N of one session only, never fewer
// than one; the chunks of pruned checkpoints are then garbage.
func testCheckpointListAndPrune(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	session(t, s, "b")
	for i := 1; i <= 5; i++ {
		commit(t, s, carryover.Checkpoint{ID: fmt.Sprint("a", i), SessionID: "a", Turn: i}, []byte(fmt.Sprint("turn ", i)))
	}
	commit(t, s, carryover.Checkpoint{ID: "b1", SessionID: "b", Turn: 1}, []byte("b"))
	list, err := s.ListCheckpoints(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 5 || list[0].ID != "a5" || list[4].ID != "a1" || len(list[0].Roots) != 1 {
		t.Fatalf("list %+v, want a5..a1 with their roots", list)
	}
	if latest, _ := s.LatestCheckpoint(ctx, "a"); latest.ID != "a5" {
		t.Fatalf("latest %s", latest.ID)
	}
	if n, err := s.Prune(ctx, "a", 2); err != nil || n != 3 {
		t.Fatalf("prune keep 2: deleted %d, %v", n, err)
	}
	if list, _ = s.ListCheckpoints(ctx, "a"); len(list) != 2 || list[0].ID != "a5" || list[1].ID != "a4" {
		t.Fatalf("after prune %+v", list)
	}
	if n, err := s.Prune(ctx, "a", 0); err != nil || n != 1 {
		t.Fatalf("prune keep 0: deleted %d (%v), want 1 (the newest stays)", n, err)
	}
	if latest, err := s.LatestCheckpoint(ctx, "a"); err != nil || latest.ID != "a5" {
		t.Fatalf("latest after prune: %+v %v", latest, err)
	}
	if list, _ := s.ListCheckpoints(ctx, "b"); len(list) != 1 {
		t.Fatalf("pruning a touched b: %+v", list)
	}
	if n, _, err := s.GC(ctx); err != nil || n != 4 {
		t.Fatalf("gc after prune freed %d chunks (err %v), want the 4 of the pruned turns", n, err)
	}
}

// testDeleteSession: deleting a session removes its records and checkpoints; its chunks become
// garbage; other sessions keep theirs.
func testDeleteSession(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		session(t, s, id)
		if _, err := s.AppendEvent(ctx, id, "x", map[string]int{"k": 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.InsertExecution(ctx, carryover.Execution{SessionID: id, Kind: "run", Code: "1", Status: "ok"}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutTool(ctx, carryover.Tool{SessionID: id, Name: "t", ToolType: "function"}); err != nil {
			t.Fatal(err)
		}
		commit(t, s, carryover.Checkpoint{ID: "cp-" + id, SessionID: id}, []byte("data of "+id))
	}
	if err := s.DeleteSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	count := func(id string) string {
		evs, _ := s.ListEvents(ctx, id, carryover.EventQuery{})
		exs, _ := s.ListExecutions(ctx, id, 0)
		tools, _ := s.ListTools(ctx, id)
		cps, _ := s.ListCheckpoints(ctx, id)
		return fmt.Sprintf("%d%d%d%d", len(evs), len(exs), len(tools), len(cps))
	}
	if got := count("a"); got != "0000" {
		t.Fatalf("deleted session keeps events, executions, tools, checkpoints: %s", got)
	}
	if got := count("b"); got != "1111" {
		t.Fatalf("kept session has %s", got)
	}
	_, err := s.GetCheckpoint(ctx, "a", "cp-a")
	wantCode(t, "checkpoint of a deleted session", err, carryover.CodeNotFound)
	if n, _, err := s.GC(ctx); err != nil || n != 1 {
		t.Fatalf("gc after delete freed %d chunks (%v), want 1", n, err)
	}
	cp, err := s.LatestCheckpoint(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadChunk(ctx, cp.Roots[0], nil); err != nil {
		t.Fatalf("chunk of the kept session: %v", err)
	}
}

// testCheckpointManyRoots: a checkpoint of 700 roots (a session of many variables: a store may
// check and record them in batches) comes back with all of them in their order, repeats once; one
// missing root among them, past the first few hundred, fails the commit with ErrMissingChunk,
// naming it.
func testCheckpointManyRoots(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "m")
	w := begin(t, s)
	defer w.Close()
	chunks := make([]carryover.ChunkInput, 700)
	roots := make([]string, len(chunks))
	for i := range chunks {
		chunks[i] = raw([]byte(fmt.Sprint("root ", i)))
		roots[len(roots)-1-i] = chunks[i].Hash // not in the order they were put
	}
	if _, err := w.PutChunks(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	cp := carryover.Checkpoint{ID: "m1", SessionID: "m", Turn: 1, Roots: append(roots, roots[3])}
	if err := w.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCheckpoint(ctx, "m", "m1")
	if err != nil || fmt.Sprint(got.Roots) != fmt.Sprint(roots) {
		t.Fatalf("roots came back as %d (%v), want the 700 in their order, the repeat once", len(got.Roots), err)
	}
	absent := chunk.Hash([]byte("never stored"))
	bad := append(append(append([]string(nil), roots[:450]...), absent), roots[450:]...)
	err = w.Commit(ctx, carryover.Checkpoint{ID: "m2", SessionID: "m", Turn: 2, Roots: bad})
	if !errors.Is(err, carryover.ErrMissingChunk) || !strings.Contains(err.Error(), absent) {
		t.Fatalf("a missing root 451st of 701: %v, want ErrMissingChunk naming it", err)
	}
}

// testCheckpointHeads: a store that names a session's newest checkpoint cheaply (CheckpointHeads)
// names the one LatestCheckpoint returns, after commits and a prune, and "" for a session without
// any; a store without it is read whole by the engine, and the test has nothing to check.
func testCheckpointHeads(t *testing.T, s carryover.Store) {
	h, ok := s.(carryover.CheckpointHeads)
	if !ok {
		t.Skip("the store does not name the newest checkpoint on its own (carryover.CheckpointHeads)")
	}
	ctx := context.Background()
	session(t, s, "a")
	session(t, s, "b")
	if id, err := h.LatestCheckpointID(ctx, "a"); err != nil || id != "" {
		t.Fatalf("head of a session without checkpoints: %q, %v", id, err)
	}
	for i := 1; i <= 3; i++ {
		commit(t, s, carryover.Checkpoint{ID: fmt.Sprint("a", i), SessionID: "a", Turn: i}, []byte(fmt.Sprint("turn ", i)))
		commit(t, s, carryover.Checkpoint{ID: fmt.Sprint("b", i), SessionID: "b", Turn: i}, []byte(fmt.Sprint("b ", i)))
		latest, err := s.LatestCheckpoint(ctx, "a")
		if id, herr := h.LatestCheckpointID(ctx, "a"); err != nil || herr != nil || id != latest.ID || id != fmt.Sprint("a", i) {
			t.Fatalf("head after commit %d: %q (%v), latest %q (%v)", i, id, herr, latest.ID, err)
		}
	}
	if _, err := s.Prune(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if id, err := h.LatestCheckpointID(ctx, "a"); err != nil || id != "a3" {
		t.Fatalf("head after prune: %q, %v", id, err)
	}
}
