package session

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/mock"
)

// TestUsageKeepsThePeakAndAddsUp: the memory peak is the largest sample, not the last, and it is
// in the stored document, so a service started again on the same store (a kernel long gone) still
// shows it beside the CPU seconds; stored bytes add up the store's checkpoints; the document's view
// does not carry the peak; an unknown session is not_found.
func TestUsageKeepsThePeakAndAddsUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, prov := mock.NewStore(), &mock.Provisioner{}
	store.ListCheckpointsFn = func(_ context.Context, id string) ([]carryover.Checkpoint, error) {
		if id != "u" {
			return nil, nil
		}
		return []carryover.Checkpoint{{ID: "c2", Bytes: 700}, {ID: "c1", Bytes: 300}}, nil
	}
	s := testServiceOn(t, store, prov, nil)
	mustCreate(t, s, CreateRequest{SessionID: "u"})
	ls := mustLive(t, s, "u")
	ls.addCost(ctx, 2, 0.5, 300<<20)
	ls.addCost(ctx, 1.5, 0, 100<<20) // a later, smaller sample: the peak stands

	again := testServiceOn(t, store, prov, nil) // the server started again: no kernel, the store's document
	u, err := again.Usage(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	want := carryover.Usage{SessionID: "u", CPUSeconds: 3.5, MemoryGiBHours: 0.5, MemoryPeakBytes: 300 << 20,
		StoredBytes: 1000, Checkpoints: 2, Sandbox: carryover.SandboxNone}
	if u != want {
		t.Errorf("usage = %+v\nwant    %+v", u, want)
	}
	doc, _ := again.Get("u")
	if b, _ := json.Marshal(doc.View()); json.Valid(b) && containsKey(b, "memory_peak_bytes") {
		t.Errorf("the session's view carries the peak: %s", b)
	}
	_, err = again.Usage(ctx, "nope")
	wantCode(t, err, carryover.CodeNotFound)
}

// containsKey reports whether the JSON object b has the top-level key k.
func containsKey(b []byte, k string) bool {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	_, ok := m[k]
	return ok
}
