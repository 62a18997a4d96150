package server_test

import (
	"bytes"
	"context"
	"math/rand/v2"
)

// importBody draws the body of a POST /api/sessions/import case: an archive exported from the
// running fixture, intact (a new session each time) or damaged as a hostile upload would be:
// truncated anywhere, a byte flipped, a block overwritten, two blocks swapped. Every damaged one
// must be refused in the API's shape (400 or 413), never a 5xx, and leave no session.
func (f *fuzzer) importBody(r *rand.Rand) ([]byte, string) {
	if f.archive == nil {
		ctx, cancel := context.WithTimeout(f.t.Context(), fuzzTimeout)
		defer cancel()
		var b bytes.Buffer
		if err := f.ts.c.ExportSession(ctx, fuzzRunning, "", &b); err != nil {
			f.t.Fatalf("exporting the fixture for the import cases: %v", err)
		}
		f.archive = b.Bytes()
	}
	a := bytes.Clone(f.archive)
	switch r.IntN(5) {
	case 0:
		return a, "an intact archive"
	case 1:
		return a[:r.IntN(len(a))], "a truncated archive"
	case 2:
		a[r.IntN(len(a))] ^= byte(1 + r.IntN(255))
		return a, "an archive with a flipped byte"
	case 3:
		off := r.IntN(len(a))
		for i := off; i < min(off+512, len(a)); i++ {
			a[i] = byte(r.IntN(256))
		}
		return a, "an archive with a block overwritten"
	default:
		if len(a) < 2048 {
			return a[:len(a)/2], "a truncated archive"
		}
		i, j := r.IntN(len(a)/512)*512, r.IntN(len(a)/512)*512
		x := bytes.Clone(a[i : i+512])
		copy(a[i:i+512], a[j:j+512])
		copy(a[j:j+512], x)
		return a, "an archive with two blocks swapped"
	}
}
