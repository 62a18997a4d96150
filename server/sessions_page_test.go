package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// TestListSessionsInPages: GET /api/sessions with limit answers pages in creation order (oldest or
// newest first) whose cursors walk every session once, even when sessions are deleted and created
// between pages; without limit it answers them all, as before; bad paging is a 400 naming the field.
// Another tenant's sessions are in none of it.
func TestListSessionsInPages(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) { c.Auth.Tenants = map[string]string{"other": "other-token"} })
	var made []string
	for i := range 7 {
		id := fmt.Sprintf("pg%d", i)
		ts.newSession(client.CreateRequest{SessionID: id})
		made = append(made, id)
	}
	other := newClient(ts.base, "other-token")
	if _, err := other.CreateSession(ts.ctx(), client.CreateRequest{SessionID: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	all, err := ts.c.ListSessions(ts.ctx())
	if err != nil || !slices.Equal(ids(all), made) {
		t.Fatalf("every session, oldest first: %v %v", ids(all), err)
	}

	walk := func(p client.SessionPage, between func(page int)) []string {
		var seen []string
		for page := 0; ; page++ {
			list, next, err := ts.c.ListSessionsPage(ts.ctx(), p)
			if err != nil || len(list) > p.Limit {
				t.Fatalf("page %d of %+v: %d sessions, %v", page, p, len(list), err)
			}
			seen = append(seen, ids(list)...)
			if next == "" {
				return seen
			}
			if between != nil {
				between(page)
			}
			p.Cursor = next
		}
	}
	if got := walk(client.SessionPage{Limit: 3}, nil); !slices.Equal(got, made) {
		t.Errorf("pages of 3, oldest first: %v", got)
	}
	newest := slices.Clone(made)
	slices.Reverse(newest)
	if got := walk(client.SessionPage{Limit: 2, Newest: true}, nil); !slices.Equal(got, newest) {
		t.Errorf("pages of 2, newest first: %v", got)
	}

	// Between the first page and the second, the page's last session is deleted and a new one made:
	// the walk still lists every session that existed throughout once, then the new one.
	got := walk(client.SessionPage{Limit: 3}, func(page int) {
		if page == 0 {
			mustDo(t, 204, "delete pg2", func(ctx context.Context) error { return ts.c.DeleteSession(ctx, "pg2") })
			ts.newSession(client.CreateRequest{SessionID: "pg7"})
		}
	})
	if want := []string{"pg0", "pg1", "pg2", "pg3", "pg4", "pg5", "pg6", "pg7"}; !slices.Equal(got, want) {
		t.Errorf("walk with a delete and a create between pages: %v, want %v", got, want)
	}

	for _, c := range []struct{ query, field string }{
		{"limit=-1", "limit"}, {"limit=x", "limit"}, {"limit=2&order=up", "order"}, {"limit=2&cursor=pg1", "cursor"}, {"cursor=12.", "cursor"},
	} {
		r := ts.raw("GET", "/api/sessions?"+c.query, "")
		var e struct {
			Error apiError `json:"error"`
		}
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != 400 || e.Error.Code != "invalid_request" || e.Error.Details["field"] != c.field {
			t.Errorf("GET /api/sessions?%s: %d %s", c.query, r.Status, r.Body)
		}
	}
}

func ids(list []client.Session) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.ID
	}
	return out
}
