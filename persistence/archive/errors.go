package archive

import (
	"errors"
	"fmt"
	"io"

	"github.com/carryover/carryover"
)

// Reasons of a refused archive: the "reason" detail of the error, one per kind of damage.
const (
	ReasonTruncated  = "truncated"  // the stream ends before the archive does
	ReasonCorrupt    = "corrupt"    // not a tar stream, a member that cannot be decoded, bad JSON
	ReasonTooLarge   = "too_large"  // over a limit (the archive, a member, a chunk, a decoded chunk)
	ReasonVersion    = "version"    // an archive or checkpoint format this server does not read
	ReasonDigest     = "digest"     // a part, a chunk or the whole does not match its digest
	ReasonPath       = "path"       // a workspace file name that is not a clean relative path
	ReasonMissing    = "missing"    // the manifest or a descriptor names a chunk the archive does not carry
	ReasonUnexpected = "unexpected" // a member that is not where the format puts it (order, name, type)
)

// refuse is the error of a refused archive, in the API's shape: invalid_request (payload_too_large
// for ReasonTooLarge) with the reason and, when known, the member.
func refuse(reason, member, msg string, args ...any) error {
	code := carryover.CodeInvalid
	if reason == ReasonTooLarge {
		code = carryover.CodePayloadTooLarge
	}
	e := carryover.Errorf(code, "archive refused: "+msg, args...)
	if member != "" {
		return e.WithDetails("reason", reason, "member", member)
	}
	return e.WithDetails("reason", reason)
}

// errTooLarge is what the counting reader returns past the archive's limit.
var errTooLarge = errors.New("archive over its size limit")

// streamErr turns an error of reading the tar stream into a refusal.
func streamErr(member string, err error, limit int64) error {
	switch {
	case errors.Is(err, errTooLarge):
		return refuse(ReasonTooLarge, member, "the archive is over this server's limit of %d bytes", limit)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return refuse(ReasonTruncated, member, "the archive ends inside %s", orStart(member))
	default:
		var ce *carryover.Error
		if errors.As(err, &ce) {
			return err
		}
		return refuse(ReasonCorrupt, member, "reading %s: %v", orStart(member), err)
	}
}

func orStart(member string) string {
	if member == "" {
		return "its first member"
	}
	return fmt.Sprintf("member %s", member)
}

// limitReader counts what is read and fails with errTooLarge past max.
type limitReader struct {
	r    io.Reader
	n    int64
	max  int64
	fail bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n >= l.max {
		// One byte more tells a stream that ends exactly at the limit from one that goes on.
		var one [1]byte
		if k, _ := l.r.Read(one[:]); k > 0 {
			l.fail = true
			return 0, errTooLarge
		}
		return 0, io.EOF
	}
	if rem := l.max - l.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	k, err := l.r.Read(p)
	l.n += int64(k)
	return k, err
}
