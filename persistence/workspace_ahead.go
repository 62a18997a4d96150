package persistence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
)

// workspaceAhead names the files of the workspace at dir that differ from a checkpoint's entries:
// a saved-kind file with another size or mtime than its entry, one the checkpoint does not hold, or
// an entry whose file is gone. A wake keeps the workspace as the live copy, so after a crash in the
// middle of a turn (or a power cut) these are what the turn never answered left; the restore report
// names them. Files the checkpoint skipped (over a limit, hidden) are not compared: no entry holds
// them either way. A missing workspace is nothing ahead.
func workspaceAhead(dir string, entries []FileEntry, lim FileLimits) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workspace of the restore: %w", err)
	}
	defer root.Close()
	cands, _, err := scanWorkspace(root, lim)
	if err != nil {
		return nil, fmt.Errorf("workspace of the restore: %w", err)
	}
	want := make(map[string]FileEntry, len(entries))
	for _, e := range entries {
		want[e.Path] = e
	}
	var ahead []string
	for _, c := range cands {
		e, ok := want[c.rel]
		delete(want, c.rel)
		if !ok || e.Size != c.size || e.ModTime.UnixNano() != c.mtime.UnixNano() {
			ahead = append(ahead, c.rel)
		}
	}
	for p := range want {
		ahead = append(ahead, p)
	}
	sort.Strings(ahead)
	return ahead, nil
}

// WorkspaceMatches reports whether the workspace at dir is still what checkpoint checkpointID of
// the session holds, by the rule a checkpoint itself skips unchanged files with (size and mtime):
// a checkpoint taken now would save no file. A missing workspace matches (nothing to save).
func (c *Checkpointer) WorkspaceMatches(ctx context.Context, sessionID, checkpointID, dir string) (bool, error) {
	cp, err := c.Store.GetCheckpoint(ctx, sessionID, checkpointID)
	if err != nil {
		return false, err
	}
	m, err := c.ParseManifest(cp)
	if err != nil {
		return false, err
	}
	ahead, err := workspaceAhead(dir, m.Files, c.Files)
	return err == nil && len(ahead) == 0, err
}
