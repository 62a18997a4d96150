package sessiondoc

import "github.com/carryover/carryover"

// ForkRequest is the body of POST /api/sessions/{id}/fork; every field is optional.
type ForkRequest struct {
	SessionID    string `json:"session_id"`      // the new session's id (with count > 1, the children's id prefix); generated when empty
	CheckpointID string `json:"checkpoint_id"`   // the source checkpoint; empty: the source's latest
	Count        *int   `json:"count,omitempty"` // how many children (1..MaxForkCount); absent: 1
}

// MaxForkCount is the most children one fork call makes.
const MaxForkCount = 100

// ForkCount is the children a fork asks for: 1 when absent, else 1..MaxForkCount.
func ForkCount(c *int) (int, error) {
	if c == nil {
		return 1, nil
	}
	if *c < 1 || *c > MaxForkCount {
		return 0, carryover.Errorf(carryover.CodeInvalid, "count must be between 1 and %d, not %d", MaxForkCount, *c).
			WithDetails("field", "count", "count", *c, "max", MaxForkCount)
	}
	return *c, nil
}
