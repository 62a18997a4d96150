package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/carryover/carryover"
)

// GET /api/sessions lists every session of the caller's tenant unless asked for a page: a tenant
// with thousands of sessions (an agent fleet's forks) should not need one answer of megabytes
// to find its newest. The order is the creation order (created_at, then id), oldest first or
// (order=desc) newest first; a page's next_cursor names where the next one starts. A cursor holds
// the last session's created_at and id, not its position, so sessions deleted or created between
// pages neither repeat one nor skip one that existed throughout.

// sessionPage is what GET /api/sessions asked for.
type sessionPage struct {
	limit  int  // 0: every session (no page)
	newest bool // order=desc
	after  *sessionCursor
}

// sessionCursor is a place in the creation order: the last session of the page before.
type sessionCursor struct {
	createdAt time.Time
	id        string
}

// String is the cursor as the API gives it: created_at in Unix nanoseconds, a dot, the id.
func (c sessionCursor) String() string {
	return strconv.FormatInt(c.createdAt.UnixNano(), 10) + "." + c.id
}

func parseSessionCursor(v string) (*sessionCursor, error) {
	ns, id, ok := strings.Cut(v, ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, carryover.Errorf(carryover.CodeInvalid, "cursor %q is not one this server gave (next_cursor of a page)", v).
			WithDetails("field", "cursor")
	}
	return &sessionCursor{createdAt: time.Unix(0, n).UTC(), id: id}, nil
}

// sessionPageQuery reads limit (1..1000: 0 and above 1000 are taken as 1000; absent: every
// session), order (asc, desc) and cursor.
func sessionPageQuery(r *http.Request) (sessionPage, error) {
	var p sessionPage
	var err error
	if p.limit, err = intParam(r, "limit", 0, 1000); err != nil {
		return p, err
	}
	switch order := r.URL.Query().Get("order"); order {
	case "", "asc":
	case "desc":
		p.newest = true
	default:
		return p, carryover.Errorf(carryover.CodeInvalid, "order must be asc or desc, not %q", order).WithDetails("field", "order")
	}
	if v := r.URL.Query().Get("cursor"); v != "" {
		if p.after, err = parseSessionCursor(v); err != nil {
			return p, err
		}
	}
	return p, nil
}

// cursorOf is s's place in the creation order.
func cursorOf(s carryover.Session) sessionCursor {
	return sessionCursor{createdAt: s.CreatedAt.UTC(), id: s.ID}
}

// compare orders two places by created_at, then id.
func (c sessionCursor) compare(o sessionCursor) int {
	if d := c.createdAt.Compare(o.createdAt); d != 0 {
		return d
	}
	return strings.Compare(c.id, o.id)
}

// page cuts list (one tenant's sessions, any order) to p, answering the next page's cursor ("":
// this page is the last).
func (p sessionPage) page(list []carryover.Session) ([]carryover.Session, string) {
	slices.SortFunc(list, func(a, b carryover.Session) int {
		d := cursorOf(a).compare(cursorOf(b))
		if p.newest {
			d = -d
		}
		return d
	})
	if p.after != nil {
		list = slices.DeleteFunc(list, func(s carryover.Session) bool {
			d := cursorOf(s).compare(*p.after)
			return d == 0 || (d < 0) != p.newest
		})
	}
	if p.limit == 0 || len(list) <= p.limit {
		return list, ""
	}
	list = list[:p.limit]
	return list, cursorOf(list[len(list)-1]).String()
}
