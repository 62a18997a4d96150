package kernel

import (
	"testing"
	"time"
)

// BenchmarkSampleFiftyGroups: one round of cost samples of 50 kernels' process groups (each a
// process of its own group), as a node's once-a-second sampling makes: through the shared map of
// groups (its one full read of /proc a round included) and, as before it, a full read per sample.
func BenchmarkSampleFiftyGroups(b *testing.B) {
	var pids []int
	for i := 0; i < 50; i++ {
		pids = append(pids, startGroup(b, "sleep 600").Process.Pid)
	}
	b.Run("shared-map", func(b *testing.B) {
		g := &groupScan{every: time.Second}
		for b.Loop() {
			g.at = time.Time{} // a round a second: the map is rebuilt once a round
			for _, p := range pids {
				if _, err := g.stats(p); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("full-read-each", func(b *testing.B) {
		for b.Loop() {
			for _, p := range pids {
				t, err := ScanProcs()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := t.Group(p); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
