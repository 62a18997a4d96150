package postgres

import (
	"container/list"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/carryover/carryover/persistence/chunk"
)

// The node-local chunk cache: object chunks by hash, in their stored form, under a directory. A chunk's
// bytes never change (the name is the hash of its content), so an entry needs no invalidation; each
// read verifies it and drops a damaged one. It is bounded: past its byte budget the least recently
// used entries are deleted (down to 90% of it, so one put does not evict on every later one). The
// budget counts from what is on disk at start, so a restart neither forgets nor double counts.

// chunkCache is safe for concurrent use. A nil *chunkCache is a cache that holds nothing.
type chunkCache struct {
	dir string
	max int64

	mu   sync.Mutex
	size int64
	lru  *list.List               // of *cacheEntry, most recently used first
	byID map[string]*list.Element // hash -> its element

	behind int64          // bytes putBehind holds, not written yet
	writes sync.WaitGroup // putBehind's writes in flight
}

type cacheEntry struct {
	hash string
	size int64
}

// openChunkCache indexes what dir already holds, oldest use last, and evicts down to max. Leftover
// temp files of interrupted writes are removed.
func openChunkCache(dir string, max int64) *chunkCache {
	c := &chunkCache{dir: dir, max: max, lru: list.New(), byID: map[string]*list.Element{}}
	type found struct {
		hash string
		size int64
		used time.Time
	}
	var all []found
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if name := d.Name(); strings.HasPrefix(name, ".tmp-") || !chunk.ValidHash(name) {
			os.Remove(p)
			return nil
		}
		all = append(all, found{d.Name(), info.Size(), info.ModTime()})
		return nil
	})
	slices.SortFunc(all, func(a, b found) int { return b.used.Compare(a.used) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range all {
		c.byID[f.hash] = c.lru.PushBack(&cacheEntry{f.hash, f.size})
		c.size += f.size
	}
	c.evictLocked()
	return c
}

func (c *chunkCache) path(hash string) string {
	return filepath.Join(c.dir, hash[:min(2, len(hash))], hash)
}

// get returns the stored bytes of hash when the cache has them and they verify.
func (c *chunkCache) get(hash, codec string, rawLen int64) ([]byte, bool) {
	data, ok := c.read(hash)
	if !ok {
		return nil, false
	}
	raw, err := chunk.Decode(codec, data, nil)
	if err != nil || chunk.Verify(hash, rawLen, raw) != nil {
		c.drop(hash)
		return nil, false
	}
	c.used(hash)
	return data, true
}

// getRaw appends the raw bytes of hash to buf when the cache has them and they verify: decoded once,
// where get's caller would decode them again.
func (c *chunkCache) getRaw(hash, codec string, rawLen int64, buf []byte) ([]byte, bool) {
	data, ok := c.read(hash)
	if !ok {
		return buf, false
	}
	start := len(buf)
	out, err := chunk.Decode(codec, data, buf)
	if err != nil || chunk.Verify(hash, rawLen, out[start:]) != nil {
		c.drop(hash)
		return buf, false
	}
	c.used(hash)
	return out, true
}

// read returns the bytes of hash's entry as they are on disk (not verified).
func (c *chunkCache) read(hash string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	data, err := os.ReadFile(c.path(hash))
	return data, err == nil
}

// used records a use of hash's entry: first in the LRU, and in its file's times, so that the use
// survives a restart (openChunkCache orders by it).
func (c *chunkCache) used(hash string) {
	now := time.Now()
	_ = os.Chtimes(c.path(hash), now, now)
	c.mu.Lock()
	if e, ok := c.byID[hash]; ok {
		c.lru.MoveToFront(e)
	}
	c.mu.Unlock()
}

// put keeps the stored bytes of hash (best effort; written aside and renamed, so a reader never sees
// half a file), then evicts past the budget. A chunk larger than the whole budget is not kept.
func (c *chunkCache) put(hash string, data []byte) {
	if c == nil || int64(len(data)) > c.max {
		return
	}
	p := c.path(hash)
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
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[hash]; ok { // rewritten in place: same content, same size
		c.lru.MoveToFront(e)
		return
	}
	c.byID[hash] = c.lru.PushFront(&cacheEntry{hash, int64(len(data))})
	c.size += int64(len(data))
	c.evictLocked()
}

// drop deletes a damaged entry.
func (c *chunkCache) drop(hash string) {
	os.Remove(c.path(hash))
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[hash]; ok {
		c.removeLocked(e)
	}
}

// evictLocked deletes least recently used entries until the cache is within 90% of its budget, once
// it is over the budget.
func (c *chunkCache) evictLocked() {
	if c.size <= c.max {
		return
	}
	for c.size > c.max-c.max/10 {
		e := c.lru.Back()
		if e == nil {
			return
		}
		os.Remove(c.path(e.Value.(*cacheEntry).hash))
		c.removeLocked(e)
	}
}

func (c *chunkCache) removeLocked(e *list.Element) {
	ent := e.Value.(*cacheEntry)
	c.lru.Remove(e)
	delete(c.byID, ent.hash)
	c.size -= ent.size
}

// bytes is what the cache holds, by its count.
func (c *chunkCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
