package archive

import (
	"slices"
	"strconv"
	"strings"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/chunk"
)

// graphCheck follows the chunk graph as the chunks stream in, parents first: the roles each chunk
// has been given by the verified parents that list it, and where each is in the stream.
type graphCheck struct {
	roles map[string]role
	pos   map[string]int
}

func newGraphCheck(idx *Index, m *persistence.Manifest) *graphCheck {
	g := &graphCheck{roles: make(map[string]role, len(idx.Chunks)), pos: make(map[string]int, len(idx.Chunks))}
	for i, c := range idx.Chunks {
		g.pos[c.Hash] = i
	}
	for _, c := range roots(m) {
		g.roles[c.hash] |= c.role
	}
	return g
}

// chunk reads the i-th chunk member, verifies it (size, decoded size, address), checks that the
// children its content lists are those the index declares and come later in the stream, and stages
// it when the store lacks it.
func (rd *reader) chunk(g *graphCheck, i int) error {
	ce := rd.st.Index.Chunks[i]
	h, err := rd.next(chunkDir, rd.lim.MaxChunkBytes)
	if err != nil {
		return err
	}
	codec := chunk.CodecRaw
	switch h.Name {
	case chunkDir + ce.Hash:
	case chunkDir + ce.Hash + zstdSuffix:
		codec = chunk.CodecZstd
	default:
		return refuse(ReasonUnexpected, h.Name, "member %q where the index puts chunk %s", h.Name, ce.Hash)
	}
	rawLen, err := strconv.ParseInt(h.PAXRecords[paxRawLen], 10, 64)
	if err != nil || rawLen < 0 {
		return refuse(ReasonCorrupt, h.Name, "chunk member without a valid %s record", paxRawLen)
	}
	if rawLen > rd.lim.MaxChunkBytes {
		return refuse(ReasonTooLarge, h.Name, "chunk %s declares %d raw bytes, over the limit of %d", ce.Hash, rawLen, rd.lim.MaxChunkBytes)
	}
	stored, err := rd.content(h)
	if err != nil {
		return err
	}
	raw, err := rd.decode(h.Name, codec, stored, rawLen)
	if err != nil {
		return err
	}
	if err := chunk.Verify(ce.Hash, rawLen, raw); err != nil {
		return refuse(ReasonDigest, h.Name, "chunk %s: %v", ce.Hash, err)
	}
	if err := g.check(rd.st.Index.Chunks, i, raw, h.Name); err != nil {
		return err
	}
	rd.st.Stats.Chunks++
	rd.st.Stats.RawBytes += rawLen
	rd.st.Stats.StoredBytes += int64(len(stored))
	if !rd.missing[ce.Hash] {
		rd.st.Present++
		return nil
	}
	in := carryover.ChunkInput{Hash: ce.Hash, Codec: codec, RawLen: rawLen, Data: slices.Clone(stored), Children: ce.Children}
	if len(ce.Children) > 0 {
		if rd.deferN += int64(len(stored)); rd.deferN > rd.lim.MaxPartBytes {
			return refuse(ReasonTooLarge, h.Name, "descriptors and index chunks over %d bytes", rd.lim.MaxPartBytes)
		}
		rd.defer_ = append(rd.defer_, in)
		return nil
	}
	rd.batch = append(rd.batch, in)
	if rd.batchN += int64(len(stored)); rd.batchN >= putBatchBytes {
		return rd.flush()
	}
	return nil
}

// decode returns the raw bytes of a chunk member, never more than rawLen of them: a zstd frame
// that would inflate past it (a bomb) is refused as soon as it does.
func (rd *reader) decode(member, codec string, stored []byte, rawLen int64) ([]byte, error) {
	if codec == chunk.CodecRaw {
		return stored, nil
	}
	if int64(cap(rd.raw)) < rawLen {
		rd.raw = make([]byte, 0, rawLen)
	}
	out, err := rd.dec.DecodeAll(stored, rd.raw[:0])
	if err != nil {
		if strings.Contains(err.Error(), "exceed") || strings.Contains(err.Error(), "too large") {
			return nil, refuse(ReasonTooLarge, member, "chunk decodes past the limit of %d bytes", rd.lim.MaxChunkBytes)
		}
		return nil, refuse(ReasonCorrupt, member, "chunk does not decode: %v", err)
	}
	if int64(len(out)) != rawLen {
		return nil, refuse(ReasonDigest, member, "chunk decodes to %d bytes, its record says %d", len(out), rawLen)
	}
	return out, nil
}

// check verifies chunk i's place in the graph: a verified parent listed it before (so its roles are
// known), its content lists exactly the children the index declares, and each of them comes later.
func (g *graphCheck) check(chunks []ChunkEntry, i int, raw []byte, member string) error {
	ce := chunks[i]
	rs := g.roles[ce.Hash]
	if rs == 0 {
		return refuse(ReasonUnexpected, member, "chunk %s comes before any chunk that lists it", ce.Hash)
	}
	var cs []child
	if rs&structural != 0 {
		var err error
		if cs, err = childrenAs(rs&structural, raw); err != nil {
			return refuse(ReasonCorrupt, member, "chunk %s: %v", ce.Hash, err)
		}
	}
	if !slices.Equal(hashSet(cs), normalized(ce.Children)) {
		return refuse(ReasonMissing, member, "chunk %s lists other chunks than the index declares for it", ce.Hash)
	}
	for _, c := range cs {
		if g.pos[c.hash] <= i {
			return refuse(ReasonUnexpected, member, "chunk %s lists chunk %s, which came before it", ce.Hash, c.hash)
		}
		g.roles[c.hash] |= c.role
	}
	return nil
}

// normalized is a children list sorted and without duplicates (as hashSet gives).
func normalized(hs []string) []string {
	out := slices.Clone(hs)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
