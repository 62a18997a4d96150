package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// TestExpandDescriptor: index chunks are read back in order into the buffer's inline list (the
// descriptor's other fields kept), and a descriptor whose index chunks are missing, or list other
// byte counts than it says, is refused rather than restored short.
func TestExpandDescriptor(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	w := writerT(t, st)
	put := func(raw []byte, children ...string) string {
		t.Helper()
		c, err := chunk.Encode(raw, children)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.PutChunks(ctx, []carryover.ChunkInput{c}); err != nil {
			t.Fatal(err)
		}
		return c.Hash
	}
	var data []string
	for i := range 5 {
		data = append(data, put([]byte(fmt.Sprintf("chunk %d", i))))
	}
	index := func(hs ...string) (string, int64) {
		run := make([][2]any, len(hs))
		for i, h := range hs {
			run[i] = [2]any{h, 7}
		}
		j, _ := json.Marshal(run)
		return put(j, hs...), int64(7 * len(hs))
	}
	i1, n1 := index(data[:3]...)
	i2, n2 := index(data[3:]...)
	desc := func(total int64, ix ...any) []byte {
		return []byte(fmt.Sprintf(`{"v":1,"k":"data","n":["a"],"f":"p","p":[],"d":[],"x":"kept","b":[[0,%d,[],%s]]}`, total, mustJSON(t, ix)))
	}

	d, flat, err := expandDescriptor(ctx, st, desc(n1+n2, [2]any{i1, n1}, [2]any{i2, n2}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Buffers[0].Chunks {
		got = append(got, c.Hash)
	}
	if strings.Join(got, ",") != strings.Join(data, ",") || d.Buffers[0].Index != nil {
		t.Errorf("expanded chunks %v, want %v", got, data)
	}
	var back map[string]any
	if err := json.Unmarshal(flat, &back); err != nil || back["x"] != "kept" || len(back["b"].([]any)[0].([]any)) != 3 {
		t.Errorf("expanded JSON %s (%v): want the other fields kept and the buffer inline", flat, err)
	}

	if _, _, err := expandDescriptor(ctx, st, desc(n1+n2, [2]any{i1, n1 + 1}, [2]any{i2, n2})); err == nil {
		t.Error("an index chunk listing fewer bytes than the descriptor says was accepted")
	}
	if _, _, err := expandDescriptor(ctx, st, desc(n1+n2+1, [2]any{i1, n1}, [2]any{i2, n2})); err == nil {
		t.Error("index chunks listing fewer bytes than the buffer was accepted")
	}
	missing := chunk.Hash([]byte("never stored"))
	if _, _, err := expandDescriptor(ctx, st, desc(n1, [2]any{missing, n1})); !errors.Is(err, carryover.ErrNotFound) {
		t.Errorf("a missing index chunk: %v, want not found", err)
	}
	// A buffer list in index chunks ("bx"), one of its buffers itself listing index chunks.
	b1, _ := json.Marshal([][]any{{1, 7, [][2]any{{data[0], 7}}}, {0, n1 + n2, []any{}, [][2]any{{i1, n1}, {i2, n2}}}})
	b2, _ := json.Marshal([][]any{{1, 7, [][2]any{{data[4], 7}}}})
	bx1, bx2 := put(b1, data[0], i1, i2), put(b2, data[4])
	list := func(n1 int64) []byte {
		return []byte(fmt.Sprintf(`{"v":1,"k":"data","n":["r"],"f":"p","p":[],"d":[],"b":[],"bx":[["%s",%d],["%s",7]]}`, bx1, n1, bx2))
	}
	d, flat, err = expandDescriptor(ctx, st, list(7+n1+n2))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Buffers) != 3 || len(d.Buffers[1].Chunks) != 5 || d.Buffers[2].Chunks[0].Hash != data[4] || strings.Contains(string(flat), `"bx"`) {
		t.Errorf("expanded buffer list %s", flat)
	}
	if _, _, err := expandDescriptor(ctx, st, list(7+n1+n2-1)); err == nil {
		t.Error("a buffer index chunk holding other bytes than the descriptor says was accepted")
	}
	if got := descriptorBytes(list(7 + n1 + n2)); got != 7+n1+n2+7 {
		t.Errorf("descriptorBytes of a buffer list in index chunks = %d, want %d", got, 7+n1+n2+7)
	}

	plain := []byte(`{"v":1,"k":"data","n":["a"],"f":"p","p":[],"d":[],"b":[[0,7,[["` + data[0] + `",7]]]]}`)
	if _, out, err := expandDescriptor(ctx, st, plain); err != nil || string(out) != string(plain) {
		t.Errorf("a descriptor without index chunks came back as %s (%v)", out, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
