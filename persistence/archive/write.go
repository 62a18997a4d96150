package archive

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/chunk"
)

// Export is what Write needs: the checkpoint to export, the store holding its chunks, the session's
// settings (the session.json member), and the source's workspace path as its kernel saw it.
type Export struct {
	Store      carryover.ChunkReader
	Checkpoint carryover.Checkpoint
	SessionID  string
	Settings   Settings
	Workspace  string
	Producer   string
	// Events, when not nil, is the events member (JSON lines of ArchivedEvent; see EncodeEvents):
	// the archive is then of version 2.
	Events []byte
}

// Stats is what an export or an import moved.
type Stats struct {
	Chunks      int   `json:"chunks"`
	RawBytes    int64 `json:"raw_bytes"`
	StoredBytes int64 `json:"stored_bytes"` // chunk bytes in the archive (zstd where it pays)
}

// Write streams the archive of e to w: the index, the manifest, the settings, every chunk the
// manifest reaches (once, parents first, each compressed with zstd when that pays) and the trailer.
// It reads the structural chunks (descriptors, index chunks: small) once to list the graph, then
// every chunk once more to write it; a few chunks are in memory at a time (readAhead).
func Write(ctx context.Context, w io.Writer, e Export) (Stats, error) {
	m, err := persistence.ParseManifest(e.Checkpoint)
	if err != nil {
		return Stats{}, fmt.Errorf("export: %w", err)
	}
	chunks, err := walk(ctx, e.Store, m)
	if err != nil {
		return Stats{}, fmt.Errorf("export: %w", err)
	}
	settings := e.Settings
	if len(settings) == 0 {
		settings = json.RawMessage("{}")
	}
	idx := Index{Format: Format, Version: 1, CreatedAt: time.Now().UTC(), Producer: e.Producer,
		Source: Source{SessionID: e.SessionID, CheckpointID: e.Checkpoint.ID, Turn: e.Checkpoint.Turn,
			CreatedAt: e.Checkpoint.CreatedAt.UTC(), Workspace: e.Workspace, ManifestFormat: m.V},
		Parts: []Part{part(ManifestName, e.Checkpoint.Manifest), part(SessionName, settings)}, Chunks: chunks}
	parts := []struct {
		name string
		b    []byte
	}{{IndexName, nil}, {ManifestName, e.Checkpoint.Manifest}, {SessionName, settings}}
	if e.Events != nil {
		idx.Version = EventVersion
		idx.Parts = append(idx.Parts, part(EventsName, e.Events))
		parts = append(parts, struct {
			name string
			b    []byte
		}{EventsName, e.Events})
	}
	if parts[0].b, err = json.Marshal(idx); err != nil {
		return Stats{}, fmt.Errorf("export: index: %w", err)
	}
	aw := &writer{tw: tar.NewWriter(w), sum: sha256.New()}
	for _, p := range parts {
		if err := aw.member(p.name, p.b, nil); err != nil {
			return Stats{}, err
		}
	}
	st, err := aw.chunks(ctx, e.Store, chunks)
	if err != nil {
		return st, err
	}
	if err := aw.member(TrailerName, []byte(hex.EncodeToString(aw.sum.Sum(nil))+"\n"), nil); err != nil {
		return st, err
	}
	if err := aw.tw.Close(); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	return st, nil
}

// paxRawLen is the PAX record of a chunk member giving the chunk's raw length.
const paxRawLen = "CARRYOVER.raw_len"

func part(name string, b []byte) Part {
	s := sha256.Sum256(b)
	return Part{Name: name, Size: int64(len(b)), SHA256: hex.EncodeToString(s[:])}
}

// writer writes members and keeps the trailer's running digest.
type writer struct {
	tw  *tar.Writer
	sum hash.Hash
}

func (a *writer) member(name string, b []byte, pax map[string]string) error {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(b)), Mode: 0o644, Format: tar.FormatPAX,
		ModTime: time.Unix(0, 0), PAXRecords: pax}
	if pax == nil {
		h.Format = tar.FormatUSTAR
	}
	if err := a.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("export: %s: %w", name, err)
	}
	if _, err := a.tw.Write(b); err != nil {
		return fmt.Errorf("export: %s: %w", name, err)
	}
	digestMember(a.sum, name, b)
	return nil
}

// digestMember adds one member to the trailer's digest: its name, a NUL, its size as 8 bytes
// big-endian, and its bytes, except a chunk's: a chunk is verified by its address (the xxh3-128 of
// its raw bytes, in its name), and hashing 1 GiB of chunks again with SHA-256 would cost more
// than the rest of an import.
func digestMember(h hash.Hash, name string, b []byte) {
	var n [8]byte
	size := uint64(len(b))
	for i := 7; i >= 0; i-- {
		n[i] = byte(size)
		size >>= 8
	}
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(n[:])
	if !strings.HasPrefix(name, chunkDir) {
		h.Write(b)
	}
}

// walk lists every chunk manifest m reaches, each once, with the children each lists, in an order
// where every chunk comes after all the chunks that list it (Kahn's order from the roots): a reader
// then knows what each chunk is (a descriptor, an index, data) before it arrives. Only structural
// chunks are read.
func walk(ctx context.Context, r carryover.ChunkReader, m *persistence.Manifest) ([]ChunkEntry, error) {
	g, order, err := discover(ctx, r, m)
	if err != nil {
		return nil, err
	}
	indeg := make(map[string]int, len(order))
	for _, h := range order {
		for _, c := range g[h] {
			indeg[c]++
		}
	}
	var queue, sorted []string
	for _, h := range order {
		if indeg[h] == 0 {
			queue = append(queue, h)
		}
	}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		sorted = append(sorted, h)
		for _, c := range g[h] {
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	if len(sorted) != len(order) {
		return nil, fmt.Errorf("the chunk graph has a cycle")
	}
	out := make([]ChunkEntry, len(sorted))
	for i, h := range sorted {
		out[i] = ChunkEntry{Hash: h, Children: g[h]}
	}
	return out, nil
}

// discover reads the structural chunks m reaches and returns each chunk's children (sorted, each
// once) and the chunks in the order first reached. A chunk reached in a new structural role is read
// again for it.
func discover(ctx context.Context, r carryover.ChunkReader, m *persistence.Manifest) (map[string][]string, []string, error) {
	roles := map[string]role{}
	kids := map[string][]child{}
	var order []string
	stack := roots(m)
	slices.Reverse(stack)
	var buf []byte
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		had, seen := roles[c.hash]
		if !seen {
			order = append(order, c.hash)
		}
		roles[c.hash] = had | c.role
		add := c.role & structural &^ had
		if add == 0 {
			continue
		}
		var err error
		if buf, err = r.ReadChunk(ctx, c.hash, buf[:0]); err != nil {
			return nil, nil, fmt.Errorf("chunk %s: %w", c.hash, err)
		}
		cs, err := childrenAs(add, buf)
		if err != nil {
			return nil, nil, fmt.Errorf("chunk %s: %w", c.hash, err)
		}
		kids[c.hash] = append(kids[c.hash], cs...)
		for j := len(cs) - 1; j >= 0; j-- {
			stack = append(stack, cs[j])
		}
	}
	g := make(map[string][]string, len(order))
	for _, h := range order {
		if cs := kids[h]; len(cs) > 0 {
			g[h] = hashSet(cs)
		}
	}
	return g, order, nil
}

// readAhead is how many chunks the export reads, verifies and encodes ahead of the one being
// written, each on a goroutine of its own: the store's reads, the checks and the writes to the
// client overlap, and at most readAhead+1 chunks are in memory.
const readAhead = 4

// encoded is one chunk read and encoded for the archive.
type encoded struct {
	name string
	data []byte
	raw  int
	err  error
}

// StoredReader is a ChunkReader that also hands out a chunk's stored form (the sqlite and postgres
// stores): an export then copies a chunk kept compressed as it is, verifying it by decoding into a
// scratch buffer, instead of decoding it and compressing it again (which cost a third of the
// export's CPU).
type StoredReader interface {
	ReadStoredChunk(ctx context.Context, hash string, buf []byte) (codec string, rawLen int64, data []byte, err error)
}

// chunks writes the chunk members, in order; up to readAhead of them are read and encoded at once.
func (a *writer) chunks(ctx context.Context, r carryover.ChunkReader, chunks []ChunkEntry) (Stats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	futures := make(chan chan encoded, readAhead)
	go func() {
		defer close(futures)
		for _, c := range chunks {
			f := make(chan encoded, 1)
			select {
			case futures <- f:
			case <-ctx.Done():
				return
			}
			go func() { f <- readEncoded(ctx, r, c.Hash) }()
		}
	}()
	var st Stats
	for f := range futures {
		e := <-f
		if e.err != nil {
			return st, e.err
		}
		if err := a.member(e.name, e.data, map[string]string{paxRawLen: strconv.Itoa(e.raw)}); err != nil {
			return st, err
		}
		st.Chunks++
		st.RawBytes += int64(e.raw)
		st.StoredBytes += int64(len(e.data))
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	if st.Chunks != len(chunks) {
		return st, fmt.Errorf("export: %d chunks of %d written", st.Chunks, len(chunks))
	}
	return st, nil
}

// readEncoded reads one chunk as the archive carries it: its stored form when the store gives it
// (verified), else its raw bytes compressed when that pays.
func readEncoded(ctx context.Context, r carryover.ChunkReader, hash string) encoded {
	var enc carryover.ChunkInput
	var err error
	if sr, ok := r.(StoredReader); ok {
		enc, err = readStored(ctx, sr, hash)
	} else {
		var raw []byte
		if raw, err = r.ReadChunk(ctx, hash, nil); err == nil {
			enc, err = chunk.EncodeHashed(raw, hash, nil)
		}
	}
	if err != nil {
		return encoded{err: fmt.Errorf("export: chunk %s: %w", hash, err)}
	}
	e := encoded{name: chunkDir + hash, data: enc.Data, raw: int(enc.RawLen)}
	if enc.Codec == chunk.CodecZstd {
		e.name += zstdSuffix
	}
	return e
}

// readStored reads a chunk's stored form and verifies it against its address (a damaged chunk
// fails the export here, not the import at the other end).
func readStored(ctx context.Context, sr StoredReader, hash string) (carryover.ChunkInput, error) {
	codec, rawLen, data, err := sr.ReadStoredChunk(ctx, hash, nil)
	if err != nil {
		return carryover.ChunkInput{}, err
	}
	if codec != chunk.CodecRaw && codec != chunk.CodecZstd {
		return carryover.ChunkInput{}, fmt.Errorf("stored with codec %q, which the format does not carry", codec)
	}
	raw := data
	if codec == chunk.CodecZstd {
		bp := scratch.Get().(*[]byte)
		defer scratch.Put(bp)
		if raw, err = chunk.Decode(codec, data, (*bp)[:0]); err != nil {
			return carryover.ChunkInput{}, fmt.Errorf("decode: %w", err)
		}
		*bp = raw[:0]
	}
	if err := chunk.Verify(hash, rawLen, raw); err != nil {
		return carryover.ChunkInput{}, err
	}
	return carryover.ChunkInput{Hash: hash, Codec: codec, RawLen: rawLen, Data: data}, nil
}

// scratch recycles the buffers stored chunks are decoded into to be verified.
var scratch = sync.Pool{New: func() any { return new([]byte) }}
