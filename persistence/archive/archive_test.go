package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/sqlite"
)

// importInto reads arch into st and commits it as session id's checkpoint.
func importInto(t testing.TB, st carryover.Store, id string, arch []byte, lim Limits) (carryover.Checkpoint, *Staged, error) {
	t.Helper()
	s, err := Read(context.Background(), bytes.NewReader(arch), st, lim)
	if err != nil {
		return carryover.Checkpoint{}, nil, err
	}
	defer s.Close()
	mkSession(t, st, id)
	cp, err := s.Commit(context.Background(), id, nil)
	return cp, s, err
}

func TestRoundTripSQLite(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, "s1")
	cp := mkCheckpoint(t, src, "s1", 1)
	arch := export(t, src, "s1", cp)

	dst := openSQLite(t)
	got, s, err := importInto(t, dst, "s2", arch, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, src, cp, dst, got)
	if s.Present != 0 || s.Written == 0 || s.Stats.Chunks != len(s.Index.Chunks) {
		t.Fatalf("first import: present %d, written %d, chunks %d of %d", s.Present, s.Written, s.Stats.Chunks, len(s.Index.Chunks))
	}
	if string(s.Settings) != `{"name":"n"}` || s.Index.Source.SessionID != "s1" || s.Index.Source.CheckpointID != cp.ID {
		t.Fatalf("settings %s, source %+v", s.Settings, s.Index.Source)
	}
	// The same archive again: every chunk is verified, none written again.
	got2, s2, err := importInto(t, dst, "s3", arch, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, src, cp, dst, got2)
	if s2.Written != 0 || s2.Present != len(s2.Index.Chunks) {
		t.Fatalf("second import wrote %d bytes, found %d of %d chunks present", s2.Written, s2.Present, len(s2.Index.Chunks))
	}
}

// TestExportIsDeterministicInContent: two exports of one checkpoint list the same chunks in the same
// order, each once (a shared chunk is carried once).
func TestExportListsEachChunkOnce(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, "s1")
	cp := mkCheckpoint(t, src, "s1", 2)
	ms := members(t, export(t, src, "s1", cp))
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.h.Name] {
			t.Fatalf("member %s twice", m.h.Name)
		}
		seen[m.h.Name] = true
	}
	if ms[0].h.Name != IndexName || ms[len(ms)-1].h.Name != TrailerName {
		t.Fatalf("first %s, last %s", ms[0].h.Name, ms[len(ms)-1].h.Name)
	}
}

// member is one tar member of an archive under test.
type member struct {
	h *tar.Header
	b []byte
}

func members(t testing.TB, arch []byte) []member {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(arch))
	var out []member
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(tr); err != nil {
			t.Fatal(err)
		}
		out = append(out, member{h, buf.Bytes()})
	}
}

func pack(t testing.TB, ms []member) []byte {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, m := range ms {
		h := *m.h
		h.Size = int64(len(m.b))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// plainReader hides a store's stored form: the export decodes and encodes each chunk.
type plainReader struct{ carryover.ChunkReader }

// damaged hands out one chunk's stored form with a byte flipped.
type damaged struct {
	*sqlite.Store
	hash string
}

func (d damaged) ReadStoredChunk(ctx context.Context, h string, buf []byte) (string, int64, []byte, error) {
	codec, n, b, err := d.Store.ReadStoredChunk(ctx, h, buf)
	if h == d.hash && len(b) > len(buf) {
		b[len(b)-1] ^= 0xff
	}
	return codec, n, b, err
}

// TestExportCopiesStoredChunks: an export copying the store's stored form writes the same members
// as one that decodes and encodes every chunk, and a damaged stored chunk fails the export (it is
// verified) instead of reaching the archive.
func TestExportCopiesStoredChunks(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, "s1")
	cp := mkCheckpoint(t, src, "s1", 3)
	stored, plain := members(t, export(t, src, "s1", cp)), members(t, export(t, plainReader{src}, "s1", cp))
	if len(stored) != len(plain) {
		t.Fatalf("%d members vs %d", len(stored), len(plain))
	}
	var last string
	for i := range stored {
		if stored[i].h.Name != plain[i].h.Name || strings.HasPrefix(stored[i].h.Name, chunkDir) && !bytes.Equal(stored[i].b, plain[i].b) {
			t.Fatalf("member %d: %s vs %s", i, stored[i].h.Name, plain[i].h.Name)
		}
		if strings.HasSuffix(stored[i].h.Name, zstdSuffix) {
			last = strings.TrimSuffix(strings.TrimPrefix(stored[i].h.Name, chunkDir), zstdSuffix)
		}
	}
	if last == "" {
		t.Fatal("no compressed chunk in the archive")
	}
	_, err := Write(context.Background(), io.Discard, Export{Store: damaged{src, last}, Checkpoint: cp, SessionID: "s1", Producer: "test"})
	if err == nil || !strings.Contains(err.Error(), last) {
		t.Fatalf("export of a damaged chunk: %v", err)
	}
}
