//go:build !linux && !darwin

package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// discardDead looks at nothing where sockets cannot be peeked at: a connection terminated while
// idle fails its next statement, which retryLost runs again when that is safe.
func discardDead(context.Context, *pgx.Conn) error { return nil }
