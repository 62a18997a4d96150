// Package format holds the versions of what carryover stores, and the rules that keep a cluster of
// mixed versions readable by all its nodes.
package format

import (
	"fmt"
	"path"
	"strings"

	"github.com/carryover/carryover"
)

// Formats. Everything a checkpoint stores is read back by whatever carryover runs later, possibly
// an older one beside a newer one in a cluster being upgraded. One number, the checkpoint format,
// versions all of it together: the manifest ("v"), the group descriptors the agent writes and the
// index chunks they list (format 1: JSON lists of [hash, length]). The manifest's "v" is the one
// that counts: a reader refuses a checkpoint at its manifest, before it reads any descriptor or
// index chunk, so those are only ever read by a binary that knows their format. The database
// schema is versioned apart, by its numbered migrations (CheckSchema).
//
// The rules (docs/operations.md, "Formats and versions"):
//   - a binary reads every format from Oldest to Newest and refuses newer ones by name;
//   - a node announces Newest (nodes.max_format); a cluster writes the newest format every live
//     node reads, stamped on each manifest it writes, and the store records the highest format
//     ever in force;
//   - a node refuses to start (or to go on heartbeating) on a store whose recorded format is newer
//     than its Newest.
//
// Format 2 changes no bytes of a checkpoint: it lets a PostgreSQL store put several large chunks in
// one object of the object store (a pack, a chunk being a byte range of it: migration 0010), which
// a node of format 1 would read whole and refuse at its checksum. So packs are written only once
// every live node reads format 2 (persistence/postgres, chunks_pack.go).
const (
	Oldest = 1
	Newest = 2
	// Packs is the first format whose nodes read chunks packed several to an object.
	Packs = 2
)

// Check refuses a stored format newer than newest, the newest format this node reads (Newest, or
// what a cluster node announces: the cluster.test_max_format hook may raise it to stand the node in
// for a newer build).
func Check(what string, v, newest int) error {
	if v > newest {
		return fmt.Errorf("%s is checkpoint format %d, newer than this carryover reads (formats %d to %d): run a newer carryover",
			what, v, Oldest, newest)
	}
	return nil
}

// NewerStore is the refusal to start on a store written in a newer format than this binary's.
// It wraps carryover.ErrNewerFormat.
func NewerStore(store string, storeFormat, newest int) error {
	return &newerStore{fmt.Sprintf("%s holds checkpoint format %d, written by a newer carryover; this carryover reads formats up to %d: "+
		"run a carryover that reads format %d (or restore a backup taken before the upgrade)", store, storeFormat, newest, storeFormat)}
}

// newerStore is NewerStore's error: its message, and carryover.ErrNewerFormat for errors.Is.
type newerStore struct{ msg string }

func (e *newerStore) Error() string { return e.msg }
func (e *newerStore) Unwrap() error { return carryover.ErrNewerFormat }

// CheckSchema refuses a database whose recorded migrations include one this binary does not know
// that sorts after the newest it knows: a newer carryover migrated it, and this one would
// misread what the newer schema holds. known and recorded are migration names ("0003_x.sql").
func CheckSchema(store string, known, recorded []string) error {
	if len(known) == 0 {
		return nil
	}
	newest := known[0]
	have := map[string]bool{}
	for _, k := range known {
		have[k] = true
		if k > newest {
			newest = k
		}
	}
	var newer string
	for _, r := range recorded {
		if !have[r] && r > newest && r > newer {
			newer = r
		}
	}
	if newer == "" {
		return nil
	}
	return fmt.Errorf("%s has schema version %s (%s), newer than this carryover knows (schema version %s, %s): "+
		"run a carryover at least as new as the one that last migrated it (or restore a backup taken before the upgrade)",
		store, schemaNumber(newer), newer, schemaNumber(newest), newest)
}

// schemaNumber is a migration's number without its leading zeros ("0007_nodes.sql" -> "7").
func schemaNumber(name string) string {
	name = path.Base(name)
	i := 0
	for i < len(name) && name[i] >= '0' && name[i] <= '9' {
		i++
	}
	n := strings.TrimLeft(name[:i], "0")
	if n == "" {
		return "0"
	}
	return n
}
