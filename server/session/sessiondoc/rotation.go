package sessiondoc

import (
	"time"

	"github.com/carryover/carryover"
)

// rotation.go: when a session's kernel rotates (docs/sessions.md#rotation): at
// sandbox.timeout_seconds less rotation.pre_rotate_buffer_seconds of its age. A buffer not below
// the timeout made every new kernel due at once: a session created with a timeout of 10 s and a
// buffer of 20 s rotated 17 times in 12 s, each a new kernel, a checkpoint and a restore.

// CheckRotation refuses rotation settings the session could not live with: a negative buffer, or
// one not below the sandbox's timeout (when kernels have one).
func CheckRotation(doc carryover.Session) error {
	buf, tmo := doc.Rotation.PreRotateBufferSeconds, doc.Sandbox.TimeoutSeconds
	const field = "rotation.pre_rotate_buffer_seconds"
	switch {
	case buf < 0:
		return carryover.Errorf(carryover.CodeInvalid, "%s must be 0 or more, not %g", field, buf).WithDetails("field", field)
	case tmo > 0 && buf >= tmo:
		return carryover.Errorf(carryover.CodeInvalid,
			"%s (%g) must be less than sandbox.timeout_seconds (%g): the session would rotate as soon as each new kernel started",
			field, buf, tmo).WithDetails("field", field)
	}
	return nil
}

// RotateAge is the kernel age at which the session rotates (0: never, its kernels have no
// timeout). A document CheckRotation would refuse (stored before it existed) still rotates sanely:
// a negative buffer counts as 0, and one not below the timeout as half of it.
func RotateAge(doc carryover.Session) time.Duration {
	buf, tmo := doc.Rotation.PreRotateBufferSeconds, doc.Sandbox.TimeoutSeconds
	if tmo <= 0 {
		return 0
	}
	switch {
	case buf < 0:
		buf = 0
	case buf >= tmo:
		buf = tmo / 2
	}
	return time.Duration((tmo - buf) * float64(time.Second))
}
