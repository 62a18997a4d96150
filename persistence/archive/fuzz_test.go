package archive

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/carryover/carryover"
)

// FuzzRead feeds Read mutated archives: the seed corpus is a good archive and every case of the
// hostile corpus (run by go test); `go test -fuzz FuzzRead ./persistence/archive/` mutates further.
// Read must never panic, must answer every refusal in the API's shape, and an archive it accepts
// must commit.
func FuzzRead(f *testing.F) {
	src := openSQLite(f, "s1")
	good := export(f, src, "s1", mkCheckpoint(f, src, "s1", 1))
	f.Add(good)
	for _, c := range hostileCases() {
		if c.lim == (Limits{}) {
			f.Add(c.mutate(f, bytes.Clone(good)))
		}
	}
	dst := openSQLite(f)
	n := 0
	f.Fuzz(func(t *testing.T, arch []byte) {
		s, err := Read(context.Background(), bytes.NewReader(arch), dst, Limits{MaxChunkBytes: 1 << 20, MaxArchiveBytes: 16 << 20})
		if err != nil {
			var ce *carryover.Error
			if !errors.As(err, &ce) {
				t.Fatalf("refused without an API error: %v", err)
			}
			return
		}
		defer s.Close()
		n++
		id := "fuzz" + string(rune('a'+n%26)) + s.Index.Source.CheckpointID
		mkSession(t, dst, id)
		if _, err := s.Commit(context.Background(), id, nil); err != nil {
			t.Fatalf("accepted but cannot commit: %v", err)
		}
	})
}
