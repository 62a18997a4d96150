package postgres

import "slices"

// maxBehind bounds the bytes of uploads waiting to be written into the node's cache (copies held
// in memory). An upload past it is not cached: a later read fills the cache, as on any other node.
const maxBehind = 8 << 20

// putBehind keeps a copy of an uploaded chunk in the cache from a goroutine of its own, so that an
// upload never waits on a disk write (an import of 1 GiB spent about a third of its CPU writing the
// cache in line). The copy, not data, is written: a caller may reuse its buffers once its put returns.
// On a busy node the writes fall behind and uploads go uncached rather than slower.
func (c *chunkCache) putBehind(hash string, data []byte) {
	n := int64(len(data))
	if c == nil || n > c.max || n > maxBehind {
		return
	}
	c.mu.Lock()
	if c.behind+n > maxBehind {
		c.mu.Unlock()
		return
	}
	c.behind += n
	c.mu.Unlock()
	cp := slices.Clone(data)
	c.writes.Add(1)
	go func() {
		defer c.writes.Done()
		c.put(hash, cp)
		c.mu.Lock()
		c.behind -= n
		c.mu.Unlock()
	}()
}

// settle waits for the writes putBehind started (tests, and a store closing).
func (c *chunkCache) settle() {
	if c != nil {
		c.writes.Wait()
	}
}
