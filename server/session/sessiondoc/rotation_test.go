package sessiondoc

import (
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestRotationSettings: a create request (and an archive's settings) whose rotation buffer is
// negative, or not below the sandbox's timeout (the config's default one included), is refused
// naming the field; a stored document with such settings still rotates no sooner than half its
// timeout, never at each new kernel's start.
func TestRotationSettings(t *testing.T) {
	tmo := func(s float64) *SandboxRequest { return &SandboxRequest{TimeoutSeconds: &s} }
	for _, c := range []struct {
		name     string
		sandbox  *SandboxRequest
		def      float64 // the config's sandbox.timeout_seconds
		buffer   float64
		refused  bool
		rotateAt time.Duration
	}{
		{"no timeout", nil, 0, 120, false, 0},
		{"buffer below the timeout", tmo(3600), 0, 120, false, 3480 * time.Second},
		{"no buffer", tmo(60), 0, 0, false, 60 * time.Second},
		{"buffer over the timeout", tmo(10), 0, 20, true, 0},
		{"buffer equal to the timeout", tmo(10), 0, 10, true, 0},
		{"buffer over the default timeout", nil, 60, 120, true, 0},
		{"negative buffer", tmo(60), 0, -5, true, 0},
	} {
		req := CreateRequest{Sandbox: c.sandbox, Rotation: &carryover.Rotation{PreRotateBufferSeconds: c.buffer}}
		doc, err := FromCreate(req, "s", "default", Node{SandboxTimeoutSeconds: c.def, CheckDisk: noDisk})
		e := carryover.ErrorOf(err)
		if c.refused != (err != nil) || (c.refused && (e.Code != carryover.CodeInvalid || e.Details["field"] != "rotation.pre_rotate_buffer_seconds")) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err == nil && RotateAge(doc) != c.rotateAt {
			t.Errorf("%s: rotates at %v, want %v", c.name, RotateAge(doc), c.rotateAt)
		}
	}
	raw := []byte(`{"sandbox": {"timeout_seconds": 10}, "rotation": {"pre_rotate_buffer_seconds": 20}}`)
	if _, _, err := FromSettings(raw, "s", "default", Node{CheckDisk: noDisk}); carryover.ErrorOf(err).Code != carryover.CodeInvalid {
		t.Errorf("an archive's rotation buffer over its timeout: %v", err)
	}
	for _, c := range []struct {
		timeout, buffer float64
		want            time.Duration
	}{
		{10, 20, 5 * time.Second}, {10, 10, 5 * time.Second}, {60, -5, 60 * time.Second}, {0, 20, 0},
	} {
		doc := carryover.Session{Sandbox: carryover.Sandbox{TimeoutSeconds: c.timeout}, Rotation: carryover.Rotation{PreRotateBufferSeconds: c.buffer}}
		if got := RotateAge(doc); got != c.want {
			t.Errorf("stored timeout %g, buffer %g: rotates at %v, want %v", c.timeout, c.buffer, got, c.want)
		}
	}
}
