package skills

import (
	"context"
	"strings"
	"testing"

	"github.com/carryover/carryover"
)

// TestAPIIsTheContextsTenants: each call of the API is for the tenant of its context; another
// tenant sees none of it.
func TestAPIIsTheContextsTenants(t *testing.T) {
	s, _ := newSkills(t)
	api := API{Skills: s}
	acme, other := carryover.NewContextWithTenant(context.Background(), "acme"), carryover.NewContextWithTenant(context.Background(), "other")
	fi, err := api.Write(acme, "lib/x.py", strings.NewReader("x = 1"))
	if err != nil || fi.Path != "lib/x.py" || fi.Size != 5 {
		t.Fatalf("Write = %+v, %v", fi, err)
	}
	if l, err := api.List(acme); err != nil || len(l) != 1 || l[0].Path != "lib/x.py" {
		t.Fatalf("acme's List = %+v, %v", l, err)
	}
	if l, err := api.List(other); err != nil || len(l) != 0 {
		t.Fatalf("another tenant's List = %+v, %v", l, err)
	}
	if _, b, err := api.Read(acme, "lib/x.py"); err != nil || string(b) != "x = 1" {
		t.Fatalf("Read = %q, %v", b, err)
	}
	if err := api.Delete(acme, "lib/x.py"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.Read(acme, "lib/x.py"); carryover.ErrorCode(err) != carryover.CodeNotFound {
		t.Fatalf("Read after Delete: %v", err)
	}
}
