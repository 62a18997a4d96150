package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/carryover/carryover"
)

// testSkills: a tenant's skill files are put, replaced, listed by path, read back byte for byte with
// their hash, deleted (CodeNotFound after, and for a path never put), and another tenant never sees
// them.
func testSkills(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	if l, err := s.ListSkills(ctx, "t1"); err != nil || l == nil || len(l) != 0 {
		t.Fatalf("empty list: %v %v (want an empty, non-nil list)", l, err)
	}
	put := func(tenant, path string, b []byte) carryover.SkillFile {
		t.Helper()
		f, err := s.PutSkill(ctx, tenant, path, b)
		if err != nil {
			t.Fatalf("put %s %s: %v", tenant, path, err)
		}
		if f.Path != path || f.Size != int64(len(b)) || f.Hash != carryover.SkillHash(b) || f.UpdatedAt.IsZero() {
			t.Fatalf("put %s: returned %+v", path, f)
		}
		return f
	}
	put("t1", "helpers.py", []byte("v1"))
	bin := []byte{0, 1, 2, 0xff, 0}
	put("t1", "data/b.bin", bin)
	put("t1", "empty", nil)
	put("t2", "helpers.py", []byte("other tenant"))
	v2 := put("t1", "helpers.py", []byte("version two"))

	l, err := s.ListSkills(ctx, "t1")
	if err != nil || len(l) != 3 || l[0].Path != "data/b.bin" || l[1].Path != "empty" || l[2].Path != "helpers.py" {
		t.Fatalf("list t1: %+v %v", l, err)
	}
	if l[2].Size != 11 || l[2].Hash != v2.Hash || !l[2].UpdatedAt.Equal(v2.UpdatedAt) {
		t.Errorf("listed %+v, put returned %+v", l[2], v2)
	}
	for path, want := range map[string][]byte{"helpers.py": []byte("version two"), "data/b.bin": bin, "empty": {}} {
		f, b, err := s.GetSkill(ctx, "t1", path)
		if err != nil || !bytes.Equal(b, want) || b == nil || f.Hash != carryover.SkillHash(want) || f.Size != int64(len(want)) {
			t.Errorf("get %s: %+v %q %v", path, f, b, err)
		}
	}
	if _, b, err := s.GetSkill(ctx, "t2", "helpers.py"); err != nil || string(b) != "other tenant" {
		t.Errorf("t2's file: %q %v", b, err)
	}
	_, _, err = s.GetSkill(ctx, "t2", "data/b.bin")
	wantCode(t, "another tenant's file", err, carryover.CodeNotFound)

	if err := s.DeleteSkill(ctx, "t1", "helpers.py"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.GetSkill(ctx, "t1", "helpers.py")
	wantCode(t, "get after delete", err, carryover.CodeNotFound)
	wantCode(t, "delete again", s.DeleteSkill(ctx, "t1", "helpers.py"), carryover.CodeNotFound)
	wantCode(t, "delete another tenant's", s.DeleteSkill(ctx, "t2", "empty"), carryover.CodeNotFound)
	if l, err := s.ListSkills(ctx, "t2"); err != nil || len(l) != 1 || l[0].Path != "helpers.py" {
		t.Errorf("t2 after t1's delete: %+v %v", l, err)
	}
}
