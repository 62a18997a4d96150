package carryover

import "testing"

func TestRestoreReportSummary(t *testing.T) {
	var none *RestoreReport
	if s := none.Summary(); s != "" {
		t.Fatalf("nil report: %q", s)
	}
	r := &RestoreReport{CheckpointID: "ckpt_1", Turn: 4,
		Recomputed:  []Recomputed{{Name: "g", Turns: []int{2, 3, 4}}, {Name: "h", Turns: []int{1, 3}}},
		Skipped:     []VarSkip{{Name: "g", Type: "generator", Reason: "cannot pickle"}, {Name: "h", Type: "generator"}, {Name: "conn", Type: "Connection", Reason: "cannot pickle 'sqlite3.Connection' object"}, {Name: "gen", Type: "generator", Reason: "cannot pickle"}},
		NotReplayed: []VarSkip{{Name: "gen", Reason: "not replayed: turn 1 writes files"}},
		Failed:      []VarSkip{{Name: "m", Type: "Model", Reason: "ImportError: no module"}},
		FilesAhead:  []string{"a.txt", "b\nc"},
	}
	want := "restored from checkpoint ckpt_1 (turn 4); recomputed [g (replayed turns 2-4), h (replayed turns 1, 3)]; " +
		"not restored [conn (Connection: cannot pickle 'sqlite3.Connection' object), gen (generator: not replayed: turn 1 writes files)]; " +
		"failed to load [m (Model: ImportError: no module)]; workspace files kept that differ from it [a.txt, \"b\\nc\"]"
	if s := r.Summary(); s != want {
		t.Fatalf("summary\n got %s\nwant %s", s, want)
	}
	if s := (&RestoreReport{CheckpointID: "ckpt_2", Turn: 1}).Summary(); s != "restored from checkpoint ckpt_2 (turn 1)" {
		t.Fatalf("a whole restore: %q", s)
	}
}
