package httpapi

// rows.go: the data viewer's endpoint, GET /api/sessions/{id}/variables/{name}/rows: one page of a
// DataFrame, Series or numpy array of the live kernel, paged, sorted and searched in the kernel.

import (
	"net/http"
	"strconv"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/agentops"
)

func (a *API) rowsRoutes() []route {
	return []route{{"GET /api/sessions/{id}/variables/{name}/rows", http.HandlerFunc(a.variableRows)}}
}

// variableRows reads ?offset= (0), &limit= (50, at most 1000), &sort= (a column), &desc=true, &q=.
func (a *API) variableRows(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := agentops.RowsQuery{Limit: 50, Q: v.Get("q")}
	var err error
	num := func(key string, dst *int) {
		if s := v.Get(key); s != "" && err == nil {
			if *dst, err = strconv.Atoi(s); err != nil {
				err = carryover.Errorf(carryover.CodeInvalid, "%s must be an integer, not %q", key, s)
			}
		}
	}
	num("offset", &q.Offset)
	num("limit", &q.Limit)
	if v.Has("sort") {
		s := v.Get("sort")
		q.Sort = &s
	}
	if s := v.Get("desc"); s != "" && err == nil {
		if q.Desc, err = strconv.ParseBool(s); err != nil {
			err = carryover.Errorf(carryover.CodeInvalid, "desc must be true or false, not %q", s)
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := ls.VariableRows(r.Context(), r.PathValue("name"), q)
	a.reply(w, r, 200, page, err)
}
