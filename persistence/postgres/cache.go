package postgres

import (
	"os"
	"path/filepath"

	"github.com/carryover/carryover/persistence/chunk"
)

// The node-local chunk cache: object chunks by hash, in their stored form, under CacheDir. A chunk's
// bytes never change (the name is the hash of its content), so an entry needs no invalidation; each
// read verifies it and drops a damaged one. The cache is not bounded here: it lives on the node's
// scratch disk and can be wiped at any time.

func (s *Store) cachePath(hash string) string {
	return filepath.Join(s.opts.CacheDir, hash[:min(2, len(hash))], hash)
}

// cached returns the stored bytes of hash from the cache when they are there and verify.
func (s *Store) cached(hash, codec string, rawLen int64) ([]byte, bool) {
	if s.opts.CacheDir == "" {
		return nil, false
	}
	p := s.cachePath(hash)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	raw, err := chunk.Decode(codec, data, nil)
	if err != nil || chunk.Verify(hash, rawLen, raw) != nil {
		os.Remove(p)
		return nil, false
	}
	return data, true
}

// cache keeps the stored bytes of hash (best effort; written aside and renamed, so a reader never
// sees half a file).
func (s *Store) cache(hash string, data []byte) {
	if s.opts.CacheDir == "" {
		return
	}
	p := s.cachePath(hash)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
}
