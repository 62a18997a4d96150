package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/carryover/carryover/persistence/sqlite"
)

// openSQLite opens a fresh SQLite store with one session, id.
func openSQLite(t testing.TB, ids ...string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range ids {
		mkSession(t, st, id)
	}
	return st
}

func mkSession(t testing.TB, st carryover.SessionStore, id string) {
	t.Helper()
	if err := st.CreateSession(context.Background(), carryover.SessionRecord{ID: id, State: "pending", Doc: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

// builder puts chunks the way the agent and the workspace snapshot do.
type builder struct {
	t     testing.TB
	w     carryover.CheckpointWriter
	rnd   *rand.Rand
	bytes int64
}

func (b *builder) put(raw []byte, children ...string) string {
	c, err := chunk.Encode(raw, children)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.w.PutChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
		b.t.Fatal(err)
	}
	b.bytes += int64(len(raw))
	return c.Hash
}

// data is n bytes, random (incompressible) or repetitive.
func (b *builder) data(n int, random bool) []byte {
	out := make([]byte, n)
	for i := range out {
		if random {
			out[i] = byte(b.rnd.Uint32())
		} else {
			out[i] = byte(i % 7)
		}
	}
	return out
}

func pairs(hs []string, ns []int) [][2]any {
	out := [][2]any{}
	for i, h := range hs {
		out = append(out, [2]any{h, ns[i]})
	}
	return out
}

// group puts a group descriptor: a pickle chunk, one buffer of inline chunks, one buffer listed
// through an index chunk (indexed true) and returns its hash.
func (b *builder) group(name string, indexed bool, seed int) string {
	pk := b.data(300+seed, false)
	ph := b.put(pk)
	var hs []string
	var ns []int
	for i := 0; i < 3; i++ {
		d := b.data(5000+i, i%2 == 0)
		hs = append(hs, b.put(d))
		ns = append(ns, len(d))
	}
	total := 0
	for _, n := range ns {
		total += n
	}
	var buf []any
	children := []string{ph}
	if indexed {
		ij, _ := json.Marshal(pairs(hs, ns))
		ih := b.put(ij, hs...)
		buf = []any{0, total, []any{}, [][2]any{{ih, total}}}
		children = append(children, ih)
	} else {
		buf = []any{0, total, pairs(hs, ns)}
		children = append(children, hs...)
	}
	desc := map[string]any{"v": 1, "k": "data", "n": []string{name}, "f": "p5", "p": [][2]any{{ph, len(pk)}}, "b": []any{buf}, "d": []string{}}
	dj, _ := json.Marshal(desc)
	return b.put(dj, children...)
}

// file puts a workspace file of n bytes in chunks of 4096 and returns its entry.
func (b *builder) file(path string, n int) persistence.FileEntry {
	d := b.data(n, true)
	var hs []string
	for off := 0; off < n; off += 4096 {
		hs = append(hs, b.put(d[off:min(off+4096, n)]))
	}
	if hs == nil {
		hs = []string{}
	}
	fj, _ := json.Marshal(map[string]any{"size": n, "chunks": hs})
	return persistence.FileEntry{Path: path, Size: int64(n), Mode: 0o644, ModTime: time.Unix(1700000000, 0).UTC(), Ref: b.put(fj, hs...)}
}

// mkCheckpoint commits a checkpoint of session id holding two groups (one indexed), an "imp" group
// and three files (one in the packages dir, one empty), and returns it.
func mkCheckpoint(t testing.TB, st carryover.CheckpointStore, id string, seed int) carryover.Checkpoint {
	t.Helper()
	ctx := context.Background()
	w, err := st.BeginCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := &builder{t: t, w: w, rnd: rand.New(rand.NewPCG(uint64(seed), 1))}
	m := persistence.Manifest{V: 1, Cwd: "/workspace/sub", Groups: []persistence.ManifestGroup{
		{Kind: "imp", Names: []string{"np"}, Module: "numpy"},
		{Kind: "data", Names: []string{"a", "b"}, Ref: b.group("a", false, seed)},
		{Kind: "data", Names: []string{"big"}, Ref: b.group("big", true, seed)},
	}, Files: []persistence.FileEntry{b.file("data.csv", 10000), b.file(".packages/lib/x.py", 100), b.file("sub/empty", 0)}}
	doc, _ := json.Marshal(m)
	cp := carryover.Checkpoint{ID: NewCheckpointID(), SessionID: id, Turn: 3 + seed, Manifest: doc, Bytes: b.bytes, Roots: rootHashes(&m)}
	if err := w.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetCheckpoint(ctx, id, cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// export writes the archive of checkpoint cp of session id in st.
func export(t testing.TB, st carryover.ChunkReader, id string, cp carryover.Checkpoint) []byte {
	t.Helper()
	var out bytes.Buffer
	if _, err := Write(context.Background(), &out, Export{Store: st, Checkpoint: cp, SessionID: id,
		Settings: json.RawMessage(`{"name":"n"}`), Workspace: "/workspace", Producer: "test"}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// sameState fails unless checkpoint b restores what a does: the same manifest and every chunk a
// reaches readable from db with the same bytes.
func sameState(t testing.TB, sa carryover.ChunkReader, a carryover.Checkpoint, sb carryover.ChunkReader, b carryover.Checkpoint) {
	t.Helper()
	if !bytes.Equal(a.Manifest, b.Manifest) || a.Turn != b.Turn {
		t.Fatalf("manifest or turn differ:\n%s %d\n%s %d", a.Manifest, a.Turn, b.Manifest, b.Turn)
	}
	ma, _ := persistence.ParseManifest(a)
	ca, err := walk(context.Background(), sa, ma)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ca {
		x, err := sa.ReadChunk(context.Background(), c.Hash, nil)
		if err != nil {
			t.Fatal(err)
		}
		y, err := sb.ReadChunk(context.Background(), c.Hash, nil)
		if err != nil {
			t.Fatalf("chunk %s not in the importing store: %v", c.Hash, err)
		}
		if !bytes.Equal(x, y) {
			t.Fatalf("chunk %s differs", c.Hash)
		}
	}
	if fmt.Sprint(a.Roots) != fmt.Sprint(b.Roots) {
		t.Fatalf("roots differ: %v vs %v", a.Roots, b.Roots)
	}
}
