// Package backup keeps copies of the single-node SQLite store outside the data dir, in a directory
// or an S3-compatible bucket, and rebuilds a data dir from them as of a point in time.
//
// A replica is a set of snapshots. A snapshot is a consistent copy of the database (SQLite's online
// backup API, persistence/sqlite.BackupTo) cut into pieces of PieceBytes, each stored once under its
// content address (pieces/<xxh3-128>, zstd when it pays), and a small JSON manifest
// (snapshots/<time>.json) listing them. Pieces are shared between snapshots, so a snapshot uploads
// only the pieces that changed since the last one: new checkpoints land mostly at the end of the
// file, and the rest of it is the same pieces again.
//
// Why not Litestream: it ships WAL frames as they are written and must own checkpointing (it holds
// a read transaction so that no one else's checkpoint resets the WAL before it copied the frames,
// and asks applications to disable their own). carryover runs its own background checkpointer
// (persistence/sqlite/walcheckpoint.go) to keep checkpoint cost out of turn latency; the two would
// fight over the WAL. Snapshots through the backup API need nothing of the writer, and their
// point-in-time granularity is the replication interval (backup.interval_seconds).
//
// Every checkpoint holds the session's workspace files (persistence/workspace_snapshot.go), and a
// session whose workspace directory is missing gets its files back from its last checkpoint when
// its kernel starts: the database is all a restore needs.
package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/carryover/carryover/persistence/s3"
)

// Target is where a replica lives: a directory or a bucket (with a key prefix).
type Target interface {
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Exists(ctx context.Context, key string) (bool, error)
	Delete(ctx context.Context, keys []string) error
	List(ctx context.Context, prefix string, fn func(key string, modified time.Time) error) error
	String() string
}

// S3Options are the credentials and endpoint of s3:// targets (backup.s3 in the config).
type S3Options struct {
	Endpoint, Region, AccessKey, SecretKey string
	PathStyle                              bool
}

// Open parses a target: s3://bucket[/prefix] (with o), or a directory path (file:// optional),
// created when missing.
func Open(ctx context.Context, url string, o S3Options) (Target, error) {
	if rest, ok := strings.CutPrefix(url, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, fmt.Errorf("backup: %q names no bucket (s3://bucket/prefix)", url)
		}
		b, err := s3.Open(ctx, s3.Options{Endpoint: o.Endpoint, Bucket: bucket, Region: o.Region, AccessKey: o.AccessKey,
			SecretKey: o.SecretKey, PathStyle: o.PathStyle, Timeout: 5 * time.Minute})
		if err != nil {
			return nil, fmt.Errorf("backup: %s: %w", url, err)
		}
		prefix = strings.Trim(prefix, "/")
		if prefix != "" {
			prefix += "/"
		}
		return &bucketTarget{b: b, prefix: prefix, url: url}, nil
	}
	dir := strings.TrimPrefix(url, "file://")
	if dir == "" {
		return nil, errors.New("backup: no target (a directory or s3://bucket/prefix)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return Dir(abs), nil
}

// Dir is a replica in a local directory (another disk, a mounted network share).
type Dir string

func (d Dir) String() string { return string(d) }

// Put writes the file whole or not at all (temp file, fsync, rename, fsync of the directory).
func (d Dir) Put(_ context.Context, key string, data []byte) error {
	p := filepath.Join(string(d), filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if dir, err := os.Open(filepath.Dir(p)); err == nil {
		_ = dir.Sync()
		dir.Close()
	}
	return nil
}

func (d Dir) Get(_ context.Context, key string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), filepath.FromSlash(key)))
}

func (d Dir) Exists(_ context.Context, key string) (bool, error) {
	_, err := os.Stat(filepath.Join(string(d), filepath.FromSlash(key)))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (d Dir) Delete(_ context.Context, keys []string) error {
	var errs []error
	for _, k := range keys {
		if err := os.Remove(filepath.Join(string(d), filepath.FromSlash(k))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (d Dir) List(_ context.Context, prefix string, fn func(key string, modified time.Time) error) error {
	root := filepath.Join(string(d), filepath.FromSlash(prefix))
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), ".tmp-") {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(string(d), p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), info.ModTime())
	})
	return err
}

// bucketTarget is a replica under a key prefix of a bucket.
type bucketTarget struct {
	b      *s3.Bucket
	prefix string
	url    string
}

func (t *bucketTarget) String() string { return t.url }

func (t *bucketTarget) Put(ctx context.Context, key string, data []byte) error {
	return t.b.Put(ctx, t.prefix+key, data)
}

func (t *bucketTarget) Get(ctx context.Context, key string) ([]byte, error) {
	return t.b.Get(ctx, t.prefix+key)
}

func (t *bucketTarget) Exists(ctx context.Context, key string) (bool, error) {
	return t.b.Exists(ctx, t.prefix+key)
}

func (t *bucketTarget) Delete(ctx context.Context, keys []string) error {
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = t.prefix + k
	}
	return t.b.Delete(ctx, full)
}

func (t *bucketTarget) List(ctx context.Context, prefix string, fn func(key string, modified time.Time) error) error {
	return t.b.List(ctx, t.prefix+prefix, func(key string, modified time.Time) error {
		return fn(strings.TrimPrefix(key, t.prefix), modified)
	})
}
