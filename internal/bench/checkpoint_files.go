package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// manyFilesRow: S6, a turn in a workspace holding many small files (a folder of samples, the shape
// a data scientist's dataset often has), none of them changed, beside the floor: a plain stat of
// every one of them in this process (the scan no checkpoint can skip without being told what
// changed). Before the turn's checkpoint remembered its newest manifest and scanned by directory
// descriptors, 10,000 files made a `1+1` turn 9x a turn without them.
func (b *ckptBench) manyFilesRow(n, reps int) ([]benchRow, error) {
	dir := filepath.Join(b.ws, "samples")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("s%05d.txt", i)), []byte(fmt.Sprint(i)), 0o644); err != nil {
			return nil, err
		}
	}
	if _, _, err := b.checkpoint("x_files = 1"); err != nil { // saves them once
		return nil, err
	}
	ds, r, err := b.repeat(reps, func(i int) string { return fmt.Sprintf("x_files = %d", i) })
	if err != nil {
		return nil, err
	}
	var floors []time.Duration
	for range reps {
		d, err := statAll(dir)
		if err != nil {
			return nil, err
		}
		floors = append(floors, d)
	}
	d, floor := percentile(ds, 50), percentile(floors, 50)
	return []benchRow{{Name: fmt.Sprintf("S6 a turn beside %d small files, none changed", n), Ours: fmtDur(d),
		Peer: fmtDur(floor) + " (stat of each)", Ratio: ratio(d, floor),
		Note: fmt.Sprintf("median of %d turns, its checkpoint (snapshot, scan, commit); the floor reads the directory and lstats every file; ", reps) + ckptNote(r, "")}}, nil
}

// statAll times reading dir and lstat'ing each of its entries.
func statAll(dir string) (time.Duration, error) {
	t := time.Now()
	es, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	for _, e := range es {
		if _, err := os.Lstat(filepath.Join(dir, e.Name())); err != nil {
			return 0, err
		}
	}
	return time.Since(t), nil
}
