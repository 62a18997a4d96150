package postgres

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carryover/carryover/persistence/chunk"
)

// TestChunkCacheBounded: past its budget the cache deletes its least recently used chunks (a read
// counts as a use), a restart counts what is on disk, and a damaged entry is dropped, not served.
func TestChunkCacheBounded(t *testing.T) {
	dir := t.TempDir()
	c := openChunkCache(dir, 3000)
	chunks := map[string][]byte{}
	var order []string
	for i := range 4 {
		data := bytes.Repeat([]byte{byte('a' + i)}, 1000)
		h := chunk.Hash(data)
		chunks[h], order = data, append(order, h)
		c.put(h, data)
		if i == 2 { // the first is used again: the second becomes the oldest
			if got, ok := c.get(order[0], chunk.CodecRaw, 1000); !ok || !bytes.Equal(got, chunks[order[0]]) {
				t.Fatalf("cached chunk 0 not served")
			}
		}
	}
	// Over 3000 bytes after the fourth: evicted down to 90%, the least recently used first.
	if c.bytes() > 2700 {
		t.Fatalf("the cache holds %d bytes, budget 3000", c.bytes())
	}
	if _, ok := c.get(order[1], chunk.CodecRaw, 1000); ok {
		t.Fatal("the least recently used chunk was kept")
	}
	if _, err := os.Stat(c.path(order[1])); !os.IsNotExist(err) {
		t.Fatalf("the evicted chunk's file is still there: %v", err)
	}
	for _, i := range []int{0, 3} {
		if _, ok := c.get(order[i], chunk.CodecRaw, 1000); !ok {
			t.Fatalf("chunk %d (recently used) was evicted", i)
		}
	}
	// A restart counts what is on disk; a leftover temp file goes.
	_ = os.WriteFile(filepath.Join(dir, order[0][:2], ".tmp-123"), []byte("half"), 0o600)
	time.Sleep(10 * time.Millisecond)
	c2 := openChunkCache(dir, 1500)
	if c2.bytes() > 1500 {
		t.Fatalf("after a restart with a 1500-byte budget the cache holds %d bytes", c2.bytes())
	}
	if _, err := os.Stat(filepath.Join(dir, order[0][:2], ".tmp-123")); !os.IsNotExist(err) {
		t.Fatal("a leftover temp file survived the restart")
	}
	// A damaged entry is dropped.
	for h := range c2.byID {
		_ = os.WriteFile(c2.path(h), bytes.Repeat([]byte{'z'}, 1000), 0o600)
		if _, ok := c2.get(h, chunk.CodecRaw, 1000); ok {
			t.Fatal("a damaged chunk was served")
		}
		if c2.bytes() != 0 {
			t.Fatalf("the damaged chunk is still counted: %d", c2.bytes())
		}
	}
	// A chunk larger than the whole budget is not kept.
	big := bytes.Repeat([]byte{'q'}, 2000)
	c2.put(chunk.Hash(big), big)
	if c2.bytes() != 0 {
		t.Fatalf("a chunk over the budget was kept: %d bytes", c2.bytes())
	}
}
