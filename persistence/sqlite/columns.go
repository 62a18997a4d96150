package sqlite

import (
	"errors"
	"time"

	"github.com/mattn/go-sqlite3"
)

// How Go values become column values and driver errors become meanings.

// timeLayout is fixed-width so that stored times sort correctly as text; go-sqlite3 parses it back
// (it strips the Z and tries its own layouts) for TIMESTAMP-declared columns.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// dbNow is the current time as the store keeps it: UTC, no monotonic reading.
func dbNow() time.Time { return time.Now().UTC().Round(0) }

// dbTime formats t for storage; a zero t means now.
func dbTime(t time.Time) string {
	if t.IsZero() {
		t = dbNow()
	}
	return t.UTC().Format(timeLayout)
}

// jsonText turns a JSON document into the TEXT stored for it; empty means def.
func jsonText(b []byte, def string) string {
	if len(b) == 0 {
		return def
	}
	return string(b)
}

// isConstraint reports whether err is an SQLite constraint violation with the given extended code.
func isConstraint(err error, code sqlite3.ErrNoExtended) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrConstraint && se.ExtendedCode == code
}
