package agentops

import (
	"strings"
	"testing"

	"github.com/carryover/carryover"
)

// TestCheckRows: a page request that is not one is the caller's mistake, refused before any kernel
// is asked.
func TestCheckRows(t *testing.T) {
	ok := RowsQuery{Limit: 50}
	if err := CheckRows("df", ok); err != nil {
		t.Fatalf("a good request: %v", err)
	}
	for name, c := range map[string]struct {
		name string
		q    RowsQuery
	}{
		"not a name":   {"df.x", ok},
		"leading _":    {"_df", ok},
		"offset < 0":   {"df", RowsQuery{Offset: -1, Limit: 50}},
		"limit 0":      {"df", RowsQuery{}},
		"limit > max":  {"df", RowsQuery{Limit: MaxRowsLimit + 1}},
		"search > 200": {"df", RowsQuery{Limit: 50, Q: strings.Repeat("q", 201)}},
	} {
		if err := CheckRows(c.name, c.q); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}
}
