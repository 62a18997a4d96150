package postgres

// maxBehind bounds the bytes of object reads waiting to be written into the node's cache (held in
// memory). A read past it is not cached: a later one fills the cache.
const maxBehind = 8 << 20

// putBehind keeps a chunk read from the object store in the cache from a goroutine of its own, so that
// a restore never waits on the cache's disk write. data is written as it is, not copied: it must not
// change afterwards (fetchObject's buffer is its own; its callers copy out of it). On a busy node the
// writes fall behind and reads go uncached rather than slower.
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
	c.writes.Add(1)
	go func() {
		defer c.writes.Done()
		c.put(hash, data)
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
