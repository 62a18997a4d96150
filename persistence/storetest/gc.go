package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// testGCFollowsDescriptors: GC keeps every chunk reachable from a checkpoint root through children,
// shared ones included, and frees the rest with their stored bytes.
func testGCFollowsDescriptors(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	w := begin(t, s)
	big := randomBytes(t, 256<<10)
	d1, d2, shared := putRaw(t, w, big[:100<<10]), putRaw(t, w, big[100<<10:]), putRaw(t, w, []byte("shared"))
	mid, _ := json.Marshal(map[string]any{"chunks": []string{d2, shared}})
	midH := putRaw(t, w, mid, d2, shared)
	top, _ := json.Marshal(map[string]any{"chunks": []string{d1, midH}})
	topH := putRaw(t, w, top, d1, midH)
	if err := w.Commit(ctx, carryover.Checkpoint{ID: "c1", SessionID: "a", Roots: []string{topH}}); err != nil {
		t.Fatal(err)
	}
	// Garbage: a lone chunk, and a descriptor with its own child (and a shared one) that nothing names.
	lone := putRaw(t, w, randomBytes(t, 1000))
	gchild := putRaw(t, w, randomBytes(t, 2000))
	gdesc, _ := json.Marshal(map[string]any{"chunks": []string{gchild, shared}})
	gdescH := putRaw(t, w, gdesc, gchild, shared)
	w.Close()

	n, freed, err := s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1000 + 2000 + len(gdesc)); n != 3 || freed != want {
		t.Fatalf("gc freed %d chunks / %d bytes, want 3 / %d", n, freed, want)
	}
	for _, h := range []string{lone, gchild, gdescH} {
		_, err := s.ReadChunk(ctx, h, nil)
		wantCode(t, "garbage chunk after GC", err, carryover.CodeNotFound)
	}
	for _, h := range []string{d1, d2, shared, midH, topH} {
		if _, err := s.ReadChunk(ctx, h, nil); err != nil {
			t.Errorf("reachable chunk %s: %v", h, err)
		}
	}
	if n, _, err := s.GC(ctx); err != nil || n != 0 {
		t.Fatalf("second gc freed %d (err %v)", n, err)
	}
}

// testGCSparesOpenWriter: chunks put through an open writer survive a concurrent GC (whether it waits
// for the writer or works around it); once the writer closes uncommitted, they are garbage; committed
// ones survive.
func testGCSparesOpenWriter(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	w := begin(t, s)
	h := putRaw(t, w, []byte("put, not yet committed"))
	done := make(chan error, 1)
	go func() {
		_, _, err := s.GC(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		done <- err // GC did not wait: fine, as long as it spared h
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := s.ReadChunk(ctx, h, nil); err != nil {
		t.Fatalf("a GC took a chunk of an open writer: %v", err)
	}
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := s.ReadChunk(ctx, h, nil)
	wantCode(t, "uncommitted chunk after its writer closed and a GC", err, carryover.CodeNotFound)

	commit(t, s, carryover.Checkpoint{ID: "c", SessionID: "a"}, []byte("committed"))
	if _, _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err := s.LatestCheckpoint(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadChunk(ctx, cp.Roots[0], nil); err != nil {
		t.Fatalf("committed chunk after GC: %v", err)
	}
}

// testGCRacingCommits runs GC in a loop while writers put chunks (data first, their descriptor in a
// later call, so a GC may fall between) and commit, or close without committing; every committed
// checkpoint must then read back whole, and the abandoned chunks must be gone after a last GC.
func testGCRacingCommits(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	const writers, turns = 4, 12
	stop := make(chan struct{})
	gcDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				gcDone <- nil
				return
			default:
			}
			if _, _, err := s.GC(ctx); err != nil {
				gcDone <- err
				return
			}
		}
	}()
	var (
		mu        sync.Mutex
		committed = map[string][]byte{} // every chunk of committed checkpoints, by hash
		abandoned []string
		wg        sync.WaitGroup
		errs      = make(chan error, writers)
	)
	for g := range writers {
		sid := fmt.Sprint("s", g)
		session(t, s, sid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for turn := range turns {
				chunks, err := racingTurn(ctx, s, sid, turn, turn%3 == 2)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if turn%3 == 2 {
					for h := range chunks {
						abandoned = append(abandoned, h)
					}
				} else {
					for h, data := range chunks {
						committed[h] = data
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-gcDone; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	verifyRacingCommits(t, s, committed, abandoned, writers, turns)
}

// racingTurn writes one checkpoint of sid: three data chunks, then their descriptor in a second call,
// then commits it (or closes without committing when abandon is set). It returns every chunk written.
func racingTurn(ctx context.Context, s carryover.CheckpointStore, sid string, turn int, abandon bool) (map[string][]byte, error) {
	w, err := s.BeginCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	chunks := map[string][]byte{}
	var batch []carryover.ChunkInput
	var hashes []string
	for i := range 3 {
		data := []byte(fmt.Sprintf("%s turn %d chunk %d %d", sid, turn, i, time.Now().UnixNano()))
		c := raw(data)
		batch = append(batch, c)
		hashes = append(hashes, c.Hash)
		chunks[c.Hash] = data
	}
	if _, err := w.PutChunks(ctx, batch); err != nil {
		return nil, err
	}
	desc, _ := json.Marshal(map[string]any{"chunks": hashes})
	d := raw(desc, hashes...)
	chunks[d.Hash] = desc
	if _, err := w.PutChunks(ctx, []carryover.ChunkInput{d}); err != nil {
		return nil, fmt.Errorf("%s turn %d: descriptor (were its children collected?): %w", sid, turn, err)
	}
	if abandon {
		return chunks, nil
	}
	cp := carryover.Checkpoint{ID: fmt.Sprintf("%s-%d", sid, turn), SessionID: sid, Turn: turn, Roots: []string{d.Hash}}
	if err := w.Commit(ctx, cp); err != nil {
		return nil, fmt.Errorf("commit %s: %w", cp.ID, err)
	}
	return chunks, nil
}

// verifyRacingCommits checks that every committed checkpoint is listed and all its chunks read back
// as written, then that a last GC takes the abandoned chunks.
func verifyRacingCommits(t *testing.T, s carryover.Store, committed map[string][]byte, abandoned []string, writers, turns int) {
	ctx := context.Background()
	ncp := 0
	for g := range writers {
		cps, err := s.ListCheckpoints(ctx, fmt.Sprint("s", g))
		if err != nil {
			t.Fatal(err)
		}
		ncp += len(cps)
	}
	if want := writers * (turns - turns/3); ncp != want {
		t.Fatalf("%d checkpoints committed, want %d", ncp, want)
	}
	for h, data := range committed {
		got, err := s.ReadChunk(ctx, h, nil)
		if err != nil {
			t.Fatalf("chunk %s of a committed checkpoint: %v", h, err)
		}
		if string(got) != string(data) {
			t.Fatalf("chunk %s reads back other bytes", h)
		}
	}
	if _, _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if missing, err := s.MissingChunks(ctx, abandoned); err != nil || len(missing) != len(abandoned) {
		t.Fatalf("%d of %d abandoned chunks survived a GC with no writer open (%v)", len(abandoned)-len(missing), len(abandoned), err)
	}
}
