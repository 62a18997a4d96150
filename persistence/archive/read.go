package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
)

// putBatchBytes bounds the data chunk bytes held for one PutChunks (two batches are in memory at
// once: one being put, one being filled). 8 MiB: with 16 the importing server of a 1 GiB archive
// grew by 70 MiB (two batches, and the garbage of those before them), over the 64 MiB it may.
const putBatchBytes = 8 << 20

// Staged is an archive read and verified whole, its missing chunks put through one CheckpointWriter
// (safe from GC, reachable from nothing) and nothing committed. Commit makes its checkpoint; Close
// (always) ends the writer, leaving uncommitted chunks to GC.
type Staged struct {
	Index    Index
	Manifest *persistence.Manifest
	Settings Settings
	// Events is the source's event log when the archive carries it (version 2), oldest first; nil
	// when it does not.
	Events []carryover.Event
	Stats  Stats // the archive's chunks
	// Written is the stored bytes newly written into the store (chunks it did not hold); Present the
	// chunks it already held, verified and not written again.
	Written int64
	Present int

	w           carryover.CheckpointWriter
	manifestRaw []byte
}

// reader is one Read in progress.
type reader struct {
	ctx     context.Context
	lim     Limits
	lr      *limitReader
	tr      *tar.Reader
	sum     hash.Hash
	store   carryover.CheckpointStore
	w       carryover.CheckpointWriter
	dec     *zstd.Decoder
	buf     []byte // a member's bytes
	raw     []byte // a decoded chunk
	missing map[string]bool
	batch   []carryover.ChunkInput
	batchN  int64
	putter  *putter
	defer_  []carryover.ChunkInput // structural chunks, put last (after the children they list)
	deferN  int64
	st      *Staged
}

// Read reads an archive from r and stages it into store: everything is checked (the tar structure,
// every member's size against its declaration and lim, the digests, the format versions, the chunk
// graph against the manifest, the workspace file names) before anything is committed. A refused
// archive returns an error in the API's shape (reasons above) and leaves nothing but unreferenced
// chunks. The caller must Close the Staged it gets.
func Read(ctx context.Context, r io.Reader, store carryover.CheckpointStore, lim Limits) (*Staged, error) {
	lim = lim.withDefaults()
	rd := &reader{ctx: ctx, lim: lim, sum: sha256.New(), store: store, st: &Staged{}}
	rd.lr = &limitReader{r: r, max: lim.MaxArchiveBytes}
	rd.tr = tar.NewReader(rd.lr)
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(lim.MaxChunkBytes)),
		zstd.WithDecoderMaxWindow(uint64(min(lim.MaxChunkBytes, 1<<30))))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	rd.dec = dec
	if err := rd.head(); err != nil {
		return nil, err
	}
	if rd.w, err = store.BeginCheckpoint(ctx); err != nil {
		return nil, err
	}
	if err := rd.body(); err != nil {
		rd.w.Close()
		return nil, err
	}
	rd.st.w = rd.w
	return rd.st, nil
}

// head reads and checks the index, the manifest and the settings.
func (rd *reader) head() error {
	ib, err := rd.member(IndexName, rd.lim.MaxPartBytes)
	if err != nil {
		return err
	}
	idx, err := parseIndex(ib, rd.lim)
	if err != nil {
		return err
	}
	rd.st.Index = *idx
	mb, err := rd.part(idx.Parts[0])
	if err != nil {
		return err
	}
	m, err := parseManifest(mb, rd.lim)
	if err != nil {
		return err
	}
	if err := checkGraph(idx, m); err != nil {
		return err
	}
	rd.st.Manifest, rd.st.manifestRaw = m, mb
	sb, err := rd.part(idx.Parts[1])
	if err != nil {
		return err
	}
	if !json.Valid(sb) || !bytes.HasPrefix(bytes.TrimSpace(sb), []byte("{")) {
		return refuse(ReasonCorrupt, SessionName, "the session settings are not a JSON object")
	}
	rd.st.Settings = append(Settings(nil), sb...)
	if len(idx.Parts) < 3 {
		return nil
	}
	eb, err := rd.part(idx.Parts[2])
	if err != nil {
		return err
	}
	if rd.st.Events, err = parseEvents(eb, rd.lim); err != nil {
		return err
	}
	if rd.st.Events == nil {
		rd.st.Events = []carryover.Event{}
	}
	return nil
}

// part reads a non-chunk member and checks its size and SHA-256 against the index.
func (rd *reader) part(p Part) ([]byte, error) {
	b, err := rd.member(p.Name, p.Size)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != p.Size {
		return nil, refuse(ReasonDigest, p.Name, "%s holds %d bytes, the index says %d", p.Name, len(b), p.Size)
	}
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != p.SHA256 {
		return nil, refuse(ReasonDigest, p.Name, "%s does not match its SHA-256 in the index: tampered or damaged", p.Name)
	}
	return append([]byte(nil), b...), nil
}

// next reads the next member's header: a regular file named want (or, when want ends in "/", any
// name under it), of at most max bytes.
func (rd *reader) next(want string, max int64) (*tar.Header, error) {
	if err := rd.ctx.Err(); err != nil {
		return nil, err
	}
	h, err := rd.tr.Next()
	if err != nil {
		return nil, streamErr(want, err, rd.lim.MaxArchiveBytes)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, refuse(ReasonUnexpected, h.Name, "member %q is not a regular file (type %q)", h.Name, h.Typeflag)
	}
	if strings.HasSuffix(want, "/") && !strings.HasPrefix(h.Name, want) || !strings.HasSuffix(want, "/") && h.Name != want {
		return nil, refuse(ReasonUnexpected, h.Name, "member %q where the format has %s", h.Name, want)
	}
	if h.Size < 0 || h.Size > max {
		return nil, refuse(ReasonTooLarge, h.Name, "member %s declares %d bytes, over the limit of %d", h.Name, h.Size, max)
	}
	return h, nil
}

// member reads the next member (see next) whole into rd.buf and adds it to the trailer's digest.
func (rd *reader) member(want string, max int64) ([]byte, error) {
	h, err := rd.next(want, max)
	if err != nil {
		return nil, err
	}
	return rd.content(h)
}

func (rd *reader) content(h *tar.Header) ([]byte, error) {
	if int64(cap(rd.buf)) < h.Size {
		rd.buf = make([]byte, h.Size)
	}
	b := rd.buf[:h.Size]
	if _, err := io.ReadFull(rd.tr, b); err != nil {
		return nil, streamErr(h.Name, err, rd.lim.MaxArchiveBytes)
	}
	digestMember(rd.sum, h.Name, b)
	return b, nil
}

// body reads the chunks and the trailer, then puts the structural chunks.
func (rd *reader) body() error {
	idx := &rd.st.Index
	hashes := make([]string, len(idx.Chunks))
	for i, c := range idx.Chunks {
		hashes[i] = c.Hash
	}
	missing, err := rd.store.MissingChunks(rd.ctx, hashes)
	if err != nil {
		return err
	}
	rd.missing = make(map[string]bool, len(missing))
	for _, h := range missing {
		rd.missing[h] = true
	}
	g := newGraphCheck(idx, rd.st.Manifest)
	rd.putter = newPutter(rd.ctx, rd.w)
	err = rd.chunks(g)
	if werr := rd.putter.wait(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	rd.st.Written += rd.putter.written
	if len(rd.defer_) > 0 {
		n, err := rd.w.PutChunks(rd.ctx, rd.defer_)
		if err != nil {
			return err
		}
		rd.st.Written += n
	}
	return nil
}

// chunks reads every chunk member and the trailer, handing full batches to the putter.
func (rd *reader) chunks(g *graphCheck) error {
	for i := range rd.st.Index.Chunks {
		if err := rd.chunk(g, i); err != nil {
			return err
		}
	}
	if err := rd.trailer(); err != nil {
		return err
	}
	return rd.flush()
}

// trailer checks the whole archive's digest and that nothing follows it.
func (rd *reader) trailer() error {
	want := hex.EncodeToString(rd.sum.Sum(nil))
	b, err := rd.member(TrailerName, 128)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) != want {
		return refuse(ReasonDigest, TrailerName, "the archive does not match its SHA-256 digest: tampered or damaged")
	}
	if h, err := rd.tr.Next(); err == nil {
		return refuse(ReasonUnexpected, h.Name, "member %q after the trailer", h.Name)
	} else if !errors.Is(err, io.EOF) {
		return streamErr(TrailerName, err, rd.lim.MaxArchiveBytes)
	}
	return nil
}

// flush hands the batched data chunks to the putter (a put that failed before is its error).
func (rd *reader) flush() error {
	if len(rd.batch) == 0 {
		return nil
	}
	if err := rd.putter.put(rd.batch); err != nil {
		return err
	}
	rd.batch, rd.batchN = nil, 0
	return nil
}

// putter puts batches of verified chunks through the writer on a goroutine of its own, so the
// store's writes (an S3 upload, a database transaction) overlap reading the next batch. One batch
// waits while one is put: at most 2 x putBatchBytes in memory.
type putter struct {
	ch      chan []carryover.ChunkInput
	done    chan struct{}
	written int64
	err     error
}

func newPutter(ctx context.Context, w carryover.ChunkWriter) *putter {
	p := &putter{ch: make(chan []carryover.ChunkInput), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for b := range p.ch {
			if p.err != nil {
				continue // drained: the reader sees the error at its next put or at wait
			}
			n, err := w.PutChunks(ctx, b)
			p.written += n
			p.err = err
		}
	}()
	return p
}

// put hands b to the goroutine; it answers a failure of an earlier put, once it is known.
func (p *putter) put(b []carryover.ChunkInput) error {
	select {
	case p.ch <- b:
		return nil
	case <-p.done:
		return p.err
	}
}

// wait ends the goroutine once its last batch is put, and answers the first put's error.
func (p *putter) wait() error {
	close(p.ch)
	<-p.done
	return p.err
}

// Commit makes the staged checkpoint session's newest, in one transaction, with a new id. cwd, when
// not nil, relocates the working dir the manifest restores. The checkpoint's Bytes are the bytes
// this import wrote (the chunks the store lacked, and the manifest).
func (s *Staged) Commit(ctx context.Context, sessionID string, cwd func(string) string) (carryover.Checkpoint, error) {
	doc, err := manifestFor(s.Manifest, s.manifestRaw, cwd)
	if err != nil {
		return carryover.Checkpoint{}, err
	}
	cp := carryover.Checkpoint{ID: NewCheckpointID(), SessionID: sessionID, Turn: s.Index.Source.Turn, Manifest: doc,
		Bytes: s.Written + int64(len(doc)), CreatedAt: nowUTC(), Roots: rootHashes(s.Manifest)}
	if err := s.w.Commit(ctx, cp); err != nil {
		return carryover.Checkpoint{}, err
	}
	return cp, nil
}

// Close ends the staging writer; chunks of an uncommitted import become garbage.
func (s *Staged) Close() {
	if s != nil && s.w != nil {
		s.w.Close()
	}
}
