package persistence

import (
	"context"
	"sync"

	"github.com/carryover/carryover"
)

// heads remembers, per session, the checkpoint this engine last committed (or read) and its
// workspace entries, which the next snapshot compares the files with. Prepare then reads and parses
// the manifest again only when another checkpoint became the newest (a restore of an older one,
// another node, another engine): with 10,000 files that read was 1.5 MB of JSON on every turn.
type heads struct {
	mu      sync.Mutex
	by      map[string]head
	entries int // file entries held, bounded by headsMaxEntries
}

type head struct {
	id    string
	files []FileEntry // shared, never written: SnapshotFiles copies what it reuses
	roots []string    // the checkpoint's roots (markUnchanged asks for them, not for every file's ref)
}

// headsMaxEntries bounds the file entries kept (~150 bytes each) and headsMaxSessions the sessions
// (deleted ones are never told); past either the cache starts again, and each session pays one full
// read.
const (
	headsMaxEntries  = 1 << 19
	headsMaxSessions = 1 << 16
)

func (h *heads) get(sessionID string) (head, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.by[sessionID]
	return e, ok
}

func (h *heads) put(sessionID string, e head) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil || h.entries+len(e.files) > headsMaxEntries || len(h.by) >= headsMaxSessions {
		h.by, h.entries = map[string]head{}, 0
	}
	h.entries += len(e.files) - len(h.by[sessionID].files)
	h.by[sessionID] = e
}

// knownHead is the session's newest checkpoint (its id, files and roots) when that is the one this
// engine last saw, asked of the store by id alone (carryover.CheckpointHeads); false otherwise: the
// caller reads the checkpoint whole.
func (c *Checkpointer) knownHead(ctx context.Context, sessionID string) (head, bool) {
	hs, can := c.Store.(carryover.CheckpointHeads)
	if !can {
		return head{}, false
	}
	h, seen := c.heads.get(sessionID)
	if !seen {
		return head{}, false
	}
	latest, err := hs.LatestCheckpointID(ctx, sessionID)
	if err != nil || latest == "" || latest != h.id {
		return head{}, false
	}
	return h, true
}
