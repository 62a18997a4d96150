package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/carryover/carryover/persistence/chunk"
)

// PieceBytes is the size of a snapshot's pieces: large enough that a big database is few objects,
// small enough that a change re-uploads little beside it.
const PieceBytes = 4 << 20

// ManifestVersion is the version of the manifest format this binary writes and the newest it reads.
const ManifestVersion = 1

// Manifest describes one snapshot. Started and Finished bracket the copy: the database is as of a
// moment between them, so it holds every commit before Started and none after Finished.
type Manifest struct {
	V        int       `json:"v"`
	Key      string    `json:"-"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Bytes    int64     `json:"bytes"`
	Pieces   []Piece   `json:"pieces"`
	Source   string    `json:"source,omitempty"` // the database it copies (informational)
}

// Piece is one PieceBytes slice of the database file: its address, codec and raw length.
type Piece struct {
	Hash  string `json:"h"`
	Codec string `json:"c"`
	Len   int64  `json:"n"`
}

// Source makes consistent copies of a database (persistence/sqlite.Store.BackupTo).
type Source interface {
	BackupTo(ctx context.Context, path string) error
}

// CopyFunc adapts a function (persistence/sqlite.BackupFile of a path) to a Source.
type CopyFunc func(ctx context.Context, path string) error

func (f CopyFunc) BackupTo(ctx context.Context, path string) error { return f(ctx, path) }

// Snapshot copies src into tmpDir, uploads the pieces t does not hold yet (known: pieces already
// known to be there; updated) and then the manifest, which makes the snapshot visible.
func Snapshot(ctx context.Context, src Source, t Target, tmpDir, name string, known map[string]bool) (*Manifest, error) {
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.MkdirTemp(tmpDir, "snapshot-")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(tmp)
	copyPath := filepath.Join(tmp, "carryover.db")
	m := &Manifest{V: ManifestVersion, Started: time.Now().UTC(), Source: name}
	if err := src.BackupTo(ctx, copyPath); err != nil {
		return nil, err
	}
	m.Finished = time.Now().UTC()
	f, err := os.Open(copyPath)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	if known == nil {
		known = map[string]bool{}
	}
	if len(known) == 0 {
		seedKnown(ctx, t, known)
	}
	if err := putPieces(ctx, t, f, m, known); err != nil {
		return nil, err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	m.Key = manifestKey(m.Finished)
	if err := t.Put(ctx, m.Key, body); err != nil {
		return nil, fmt.Errorf("backup: manifest: %w", err)
	}
	return m, nil
}

// seedKnown fills known with the pieces t holds, in one listing: a backup into a target that has
// an earlier snapshot then neither compresses nor asks about each unchanged piece again (40 round
// trips to a bucket for a 157 MiB store). A failed listing leaves it to those questions.
func seedKnown(ctx context.Context, t Target, known map[string]bool) {
	_ = t.List(ctx, "pieces/", func(key string, _ time.Time) error {
		known[key] = true
		return nil
	})
}

// putConcurrency pieces are checked and uploaded at once: each put waits on a round trip (S3) or
// an fsync (a directory), and one at a time the snapshot of a fresh replica took ten times a copy.
const putConcurrency = 8

// putPieces reads the copy piece by piece into m.Pieces, in order, uploading the new ones
// concurrently.
func putPieces(ctx context.Context, t Target, f io.Reader, m *Manifest, known map[string]bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // known and firstErr
		first error
		sem   = make(chan struct{}, putConcurrency)
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
			cancel()
		}
		mu.Unlock()
	}
	for {
		raw := make([]byte, PieceBytes)
		n, err := io.ReadFull(f, raw)
		if n > 0 {
			m.Bytes += int64(n)
			h := chunk.Hash(raw[:n])
			mu.Lock()
			codec := knownCodec(known, h)
			mu.Unlock()
			if codec != "" { // the target has it (or its put is under way): not compressed again
				m.Pieces = append(m.Pieces, Piece{Hash: h, Codec: codec, Len: int64(n)})
				continue
			}
			in, eerr := chunk.EncodeHashed(raw[:n], h, nil)
			if eerr != nil {
				fail(eerr)
				break
			}
			p := Piece{Hash: in.Hash, Codec: in.Codec, Len: int64(n)}
			m.Pieces = append(m.Pieces, p)
			key := pieceKey(p)
			mu.Lock()
			skip := known[key]
			known[key] = true // a later identical piece waits for nothing: this one's put is under way
			mu.Unlock()
			if !skip {
				sem <- struct{}{}
				wg.Add(1)
				go func(data []byte) {
					defer func() { <-sem; wg.Done() }()
					if err := putPiece(ctx, t, key, data); err != nil {
						mu.Lock()
						delete(known, key)
						mu.Unlock()
						fail(err)
					}
				}(in.Data)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			fail(fmt.Errorf("backup: reading the copy: %w", err))
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	return first
}

// putPiece uploads one piece unless the target has it already.
func putPiece(ctx context.Context, t Target, key string, data []byte) error {
	ok, err := t.Exists(ctx, key)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if ok {
		return nil
	}
	if err := t.Put(ctx, key, data); err != nil {
		return fmt.Errorf("backup: piece: %w", err)
	}
	return nil
}

// knownCodec is the codec under which known holds the piece of raw hash h, "" when it does not:
// an unchanged piece is recognised by its hash before it is compressed (zstd cost a backup of an
// unchanged store most of its time).
func knownCodec(known map[string]bool, h string) string {
	for _, c := range []string{chunk.CodecZstd, chunk.CodecRaw} {
		if known[pieceKey(Piece{Hash: h, Codec: c})] {
			return c
		}
	}
	return ""
}

// pieceKey names a piece by address and codec (the same bytes under another codec are another object).
func pieceKey(p Piece) string { return "pieces/" + p.Hash + "." + p.Codec }

// manifestKey sorts by time as text.
func manifestKey(t time.Time) string {
	return "snapshots/" + t.UTC().Format("20060102T150405.000000000Z") + ".json"
}
