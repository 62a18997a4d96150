package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
)

// CopyCheckpoint commits, as session dst's newest checkpoint, a checkpoint with the manifest and roots
// of checkpoint srcID of session src (a fork), marked Forked: the chunks are shared, none is written,
// so its Bytes are the manifest's length only. It runs through one CheckpointWriter, so a GC cannot take the source
// chunks between reading the source checkpoint and committing the copy (even if src is deleted then).
// cwd, when not nil, may change the working dir the manifest restores (a host path naming the
// source's workspace, for a kernel that is not sandboxed). CodeNotFound if the source checkpoint does
// not exist.
func (c *Checkpointer) CopyCheckpoint(ctx context.Context, src, srcID, dst string, cwd func(string) string) (carryover.Checkpoint, error) {
	w, err := c.Store.BeginCheckpoint(ctx)
	if err != nil {
		return carryover.Checkpoint{}, fmt.Errorf("copy checkpoint: %w", err)
	}
	defer w.Close()
	from, err := c.Store.GetCheckpoint(ctx, src, srcID)
	if err != nil {
		return carryover.Checkpoint{}, err
	}
	m, err := c.ParseManifest(from)
	if err != nil {
		return carryover.Checkpoint{}, fmt.Errorf("copy checkpoint %s of %s: %w", srcID, src, err)
	}
	if cwd != nil {
		m.Cwd = cwd(m.Cwd)
	}
	m.Forked = true
	doc, err := json.Marshal(m)
	if err != nil {
		return carryover.Checkpoint{}, fmt.Errorf("copy checkpoint %s of %s: %w", srcID, src, err)
	}
	cp := carryover.Checkpoint{ID: newCheckpointID(), SessionID: dst, Turn: from.Turn, Manifest: doc,
		Bytes: int64(len(doc)), CreatedAt: time.Now().UTC(), Roots: from.Roots}
	if err := w.Commit(ctx, cp); err != nil {
		return carryover.Checkpoint{}, fmt.Errorf("copy checkpoint %s of %s: %w", srcID, src, err)
	}
	return cp, nil
}

// MaterializeWorkspace writes the files of session's latest checkpoint into dir, which must not
// exist: they go to a sibling temporary dir first, renamed to dir when complete, so a crash never
// leaves a half-restored workspace that would later pass for a complete one. It returns how many
// files were written.
func (c *Checkpointer) MaterializeWorkspace(ctx context.Context, sessionID, dir string) (int, error) {
	cp, err := c.Store.LatestCheckpoint(ctx, sessionID)
	if err != nil {
		return 0, fmt.Errorf("restore files: %w", err)
	}
	m, err := c.ParseManifest(cp)
	if err != nil {
		return 0, fmt.Errorf("restore files: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".restoring")
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return 0, fmt.Errorf("restore files: %w", err)
	}
	if err := c.restoreWorkspace(ctx, m, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return 0, fmt.Errorf("restore files: %w", damaged(err))
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return 0, fmt.Errorf("restore files: %w", err)
	}
	return len(m.Files), nil
}
