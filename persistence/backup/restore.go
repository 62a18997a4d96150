package backup

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // the integrity check of a restored file

	"github.com/carryover/carryover/persistence/chunk"
)

// List returns the target's snapshots, oldest first.
func List(ctx context.Context, t Target) ([]*Manifest, error) {
	var keys []string
	err := t.List(ctx, "snapshots/", func(key string, _ time.Time) error {
		if strings.HasSuffix(key, ".json") {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("backup: listing %s: %w", t, err)
	}
	sort.Strings(keys)
	out := make([]*Manifest, 0, len(keys))
	for _, k := range keys {
		body, err := t.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("backup: %s: %w", k, err)
		}
		var m Manifest
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("backup: %s: %w", k, err)
		}
		if m.V > ManifestVersion {
			return nil, fmt.Errorf("backup: %s is snapshot format %d; this carryover reads up to format %d: restore with a newer carryover", k, m.V, ManifestVersion)
		}
		m.Key = k
		out = append(out, &m)
	}
	return out, nil
}

// Pick is the newest snapshot finished at or before at (zero: the newest of all).
func Pick(ms []*Manifest, at time.Time) (*Manifest, error) {
	var best *Manifest
	for _, m := range ms {
		if at.IsZero() || !m.Finished.After(at) {
			if best == nil || m.Finished.After(best.Finished) {
				best = m
			}
		}
	}
	if best == nil {
		if len(ms) == 0 {
			return nil, errors.New("backup: the target holds no snapshot")
		}
		return nil, fmt.Errorf("backup: no snapshot finished by %s (the oldest finished at %s)", at.UTC().Format(time.RFC3339Nano),
			ms[0].Finished.Format(time.RFC3339Nano))
	}
	return best, nil
}

// Restore rebuilds a data dir from the snapshot Pick chooses: dataDir/carryover.db, written whole
// (a temp file renamed into place), each piece checked against its address, the result checked by
// SQLite. A data dir that already has a database or workspaces is refused: nothing is overwritten.
func Restore(ctx context.Context, t Target, at time.Time, dataDir string) (*Manifest, error) {
	ms, err := List(ctx, t)
	if err != nil {
		return nil, err
	}
	m, err := Pick(ms, at)
	if err != nil {
		return nil, err
	}
	dst := filepath.Join(dataDir, "carryover.db")
	// A workspaces dir left there would be taken for the sessions' files (a session gets its files
	// from its checkpoint only when its workspace is missing): refused like a database.
	for _, p := range []string{dst, dst + "-wal", filepath.Join(dataDir, "workspaces")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("backup: %s already exists: restore into an empty data dir", p)
		}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	tmp := dst + ".restoring"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	fail := func(err error) (*Manifest, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	var raw []byte
	for i, p := range m.Pieces {
		data, err := t.Get(ctx, pieceKey(p))
		if err != nil {
			return fail(fmt.Errorf("backup: snapshot %s piece %d: %w", m.Key, i, err))
		}
		if raw, err = chunk.Decode(p.Codec, data, raw[:0]); err != nil {
			return fail(fmt.Errorf("backup: snapshot %s piece %d: %w", m.Key, i, err))
		}
		if err := chunk.Verify(p.Hash, p.Len, raw); err != nil {
			return fail(fmt.Errorf("backup: snapshot %s piece %d: %w", m.Key, i, err))
		}
		if _, err := f.Write(raw); err != nil {
			return fail(fmt.Errorf("backup: %w", err))
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := quickCheck(ctx, tmp); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("backup: snapshot %s: %w", m.Key, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return m, nil
}

// quickCheck runs PRAGMA quick_check on a restored file before it is put in place.
func quickCheck(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&res); err != nil {
		return fmt.Errorf("quick_check: %w", err)
	}
	if res != "ok" {
		return fmt.Errorf("quick_check: %s", res)
	}
	return nil
}
