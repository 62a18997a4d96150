package agentops

import (
	"context"
	"regexp"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// rows.go: the data viewer's pages. A DataFrame, Series or 1-D/2-D numpy array of the live kernel
// is paged, sorted and searched inside the kernel (the agent's op_rows), so only one page crosses
// to the server and on to the browser, whatever the frame's size.

// rowsTimeout bounds one page: the first sort or search of a ten-million-row frame takes seconds.
const rowsTimeout = 60 * time.Second

// MaxRowsLimit is the most rows one page may ask for.
const MaxRowsLimit = 1000

// RowsQuery selects a page: rows [Offset, Offset+Limit) of the rows that contain Q (any column's
// text, case ignored; "" all), ordered by column Sort ("" the frame's order), descending with Desc.
type RowsQuery struct {
	Offset int
	Limit  int
	Sort   *string
	Desc   bool
	Q      string
}

// RowsColumn is one column of a page: its name (as text) and dtype.
type RowsColumn struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
}

// RowsPage is the answer of GET /api/sessions/{id}/variables/{name}/rows.
type RowsPage struct {
	Name        string       `json:"name"`
	Type        string       `json:"type"`
	Columns     []RowsColumn `json:"columns"`
	TotalRows   int          `json:"total_rows"`
	MatchedRows int          `json:"matched_rows"` // after the search
	Offset      int          `json:"offset"`
	Limit       int          `json:"limit"`
	Index       []any        `json:"index"` // the rows' index labels
	Rows        [][]any      `json:"rows"`  // values: numbers, booleans, null (also NaN), or text cut to 500 characters
}

var pyName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,199}$`)

// CheckRows refuses a page request that is not one: a name that is not a Python name, an offset or
// limit out of range, a search text too long.
func CheckRows(name string, q RowsQuery) error {
	switch {
	case !pyName.MatchString(name):
		return carryover.Errorf(carryover.CodeInvalid, "variable name %q is not a Python name of the namespace", name)
	case q.Offset < 0:
		return carryover.Errorf(carryover.CodeInvalid, "offset must be 0 or more").WithDetails("field", "offset")
	case q.Limit < 1 || q.Limit > MaxRowsLimit:
		return carryover.Errorf(carryover.CodeInvalid, "limit must be 1 to %d", MaxRowsLimit).WithDetails("field", "limit")
	case len(q.Q) > 200:
		return carryover.Errorf(carryover.CodeInvalid, "q is at most 200 bytes").WithDetails("field", "q")
	}
	return nil
}

// Rows is one page of variable name of an idle kernel (CheckRows passed), paged, sorted and searched
// inside the kernel (the agent's op_rows), so only one page crosses to the server, whatever the
// frame's size.
func Rows(ctx context.Context, k *kernel.Kernel, name string, q RowsQuery) (*RowsPage, error) {
	ctx, cancel := context.WithTimeout(ctx, rowsTimeout)
	defer cancel()
	args := map[string]any{"name": name, "offset": q.Offset, "limit": q.Limit, "desc": q.Desc, "q": q.Q}
	if q.Sort != nil {
		args["sort"] = *q.Sort
	}
	var ans struct {
		RowsPage
		Error *carryover.Error `json:"error"`
	}
	if err := persistence.CallAgent(ctx, k, "rows", args, &ans); err != nil {
		return nil, &carryover.Error{Code: carryover.CodeInternal, Message: "the kernel could not page the variable: " + err.Error(), Err: err}
	}
	if ans.Error != nil {
		return nil, ans.Error
	}
	if ans.Rows == nil {
		ans.Rows = [][]any{}
	}
	return &ans.RowsPage, nil
}
