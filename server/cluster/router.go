package cluster

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/carryover/carryover"
)

// Hop headers: a request proxied by a node carries them, so the owner never proxies it on (a
// stale view of ownership answers 421 instead of looping).
const (
	HopHeader   = "X-Carryover-Hop"
	TokenHeader = "X-Carryover-Cluster-Token"
)

// Authenticator tells whether a request carries a valid API token (httpapi.API.Authenticate).
type Authenticator func(r *http.Request) (token, tenant string, ok bool)

// Wrap routes session-scoped requests (/api/sessions/{id}/..., and the Jupyter front door's
// /jupyter/api/kernels/{id}/...: a Jupyter kernel is a session) to the session's owner; everything
// else goes to next. Requests without a valid token go to next too (it refuses them), so an
// anonymous caller cannot move sessions between nodes.
func (n *Node) Wrap(next http.Handler, auth Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := sessionIDOf(r.Method, r.URL.Path)
		if id == "" {
			id = jupyterKernelID(r.URL.Path)
		}
		_, tenant, ok := auth(withPathToken(r))
		if ok && id == "" && r.Method == http.MethodPost && r.URL.Path == reattachPath {
			id = n.reattachID(r, tenant)
		}
		if ok && id == "" && r.Method == http.MethodPost && r.URL.Path == createPath {
			n.create(w, r, next)
			return
		}
		if id == "" || !ok || n.readWhileDraining(r, id) {
			next.ServeHTTP(w, r)
			return
		}
		to, err := n.route(r.Context(), id, r.Header.Get(HopHeader) != "")
		switch {
		case err != nil && !errors.Is(err, carryover.ErrNotOwner):
			n.writeError(w, err)
		case to.local && to.full != "" && n.o.Full != nil:
			done := n.o.Full.keep(id, to.full) // the session's refusals say the cluster is full (full.go)
			defer done()
			next.ServeHTTP(w, r)
		case to.local:
			next.ServeHTTP(w, r)
		case r.Header.Get(HopHeader) != "" || to.owner.Addr == "":
			n.writeError(w, notOwner(id, to.owner))
		default:
			n.proxy(w, r, id, to)
		}
	})
}

// where is route's decision: served here (local), or by owner; placed means nobody serves the
// session yet and this node sends it to owner, a node with room, which claims it. full is the
// cluster's figures when a session was claimed here because no node had room.
type where struct {
	owner  carryover.Owner
	local  bool
	placed bool
	full   string
}

// route decides where session id is served: here, or by its owner. A session nobody serves is
// claimed by this node and adopted from the store (its kernel restores from the last checkpoint),
// unless this node is full and another has room: then it goes there (placement.go). A request
// another node sent here (hopped) is never sent on: this node claims it and bounds itself.
func (n *Node) route(ctx context.Context, id string, hopped bool) (where, error) {
	if !n.leaseValid() {
		n.fence("lease expired before a request")
		return where{}, carryover.Errorf(carryover.CodeNotOwner,
			"node %s lost contact with the cluster's database; ask another node", n.o.Node.ID)
	}
	if n.Draining() {
		return n.routeDraining(ctx, id, hopped)
	}
	if _, held := n.o.Ownership.Held(id); held {
		if n.o.Sessions.Has(id) {
			return where{local: true}, nil
		}
	}
	n.claimMu.Lock()
	defer n.claimMu.Unlock()
	if _, held := n.o.Ownership.Held(id); held {
		if !n.o.Sessions.Has(id) {
			if err := n.o.Sessions.Adopt(ctx, id); err != nil {
				return where{}, err
			}
		}
		return where{local: true}, nil
	}
	n.o.Sessions.Evict(id) // a copy from before another node took it over
	o, err := n.o.Ownership.Owner(ctx, id)
	if err != nil {
		if errors.Is(err, carryover.ErrNotFound) {
			return where{owner: o, local: true}, nil // let the API answer its own 404
		}
		return where{owner: o}, err
	}
	if o.Node != "" && o.Node != n.o.Node.ID {
		return where{owner: o}, nil
	}
	if hopped {
		return n.claim(ctx, id)
	}
	// The wake of a session nobody serves goes to a peer with room when this node has no free slot.
	// When the cluster is full it stays here, where the node's own queue bounds what needs a kernel
	// (a read of the session needs none) and its refusal says the cluster is full.
	target, full := n.place()
	if target != nil {
		return where{owner: carryover.Owner{Node: target.ID, Addr: target.Addr, Epoch: o.Epoch}, placed: true}, nil
	}
	to, err := n.claim(ctx, id)
	if full != nil {
		to.full = full.String()
	}
	return to, err
}

// claim makes this node session id's owner and adopts it; a node that won the race instead is
// where it is served.
func (n *Node) claim(ctx context.Context, id string) (where, error) {
	if _, err := n.o.Ownership.Claim(ctx, id); err != nil {
		if errors.Is(err, carryover.ErrNotOwner) {
			o, oerr := n.o.Ownership.Owner(ctx, id)
			return where{owner: o}, oerr
		}
		return where{}, err
	}
	if err := n.o.Sessions.Adopt(ctx, id); err != nil {
		return where{}, err
	}
	n.log.Info("session claimed", "session", id)
	return where{owner: carryover.Owner{Node: n.o.Node.ID}, local: true}, nil
}

// proxy forwards the request (websocket upgrades included) to the owner with the hop headers; the
// caller's own token goes along, so the owner checks it and its tenant as usual. While it is in
// flight the owner is watched: when it changes (the owner died or paused and its TTL ran out, or it
// released the session) the request is cut and answered 421, so the caller retries and reaches the
// new owner instead of waiting on a node that will never answer.
func (n *Node) proxy(w http.ResponseWriter, r *http.Request, id string, to where) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go n.watchOwner(ctx, cancel, id, to.owner, to.placed)
	n.forward(w, r.WithContext(ctx), to.owner.Addr, func(w http.ResponseWriter, err error) {
		n.log.Warn("proxy to owner failed", "session", id, "owner", to.owner.Node, "err", err)
		n.writeError(w, notOwner(id, to.owner))
	})
}

// forward sends the request to the node at addr with the hop headers, streaming the answer back;
// failed answers the request when that node cannot be reached.
func (n *Node) forward(w http.ResponseWriter, r *http.Request, addr string, failed func(http.ResponseWriter, error)) {
	target, err := url.Parse(addr)
	if err != nil {
		failed(w, err)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(HopHeader, n.o.Node.ID)
			pr.Out.Header.Set(TokenHeader, n.o.Token)
		},
		FlushInterval: -1, // stream as it comes (runs print progressively)
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			failed(w, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// watchOwner cancels when session id's owner is no longer owner (checked every heartbeat). A placed
// session has no owner yet: the node it was sent to claims it at a new epoch, which is then the one
// watched; another node claiming it first cancels.
func (n *Node) watchOwner(ctx context.Context, cancel context.CancelFunc, id string, owner carryover.Owner, placed bool) {
	t := time.NewTicker(n.o.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			o, err := n.o.Ownership.Owner(ctx, id)
			if err != nil {
				continue
			}
			if placed && o.Node == "" {
				continue // not claimed yet
			}
			if placed && o.Node == owner.Node {
				placed, owner = false, o
				continue
			}
			if o.Node != owner.Node || o.Epoch != owner.Epoch {
				cancel()
				return
			}
		}
	}
}

func notOwner(id string, o carryover.Owner) *carryover.Error {
	return carryover.Errorf(carryover.CodeNotOwner, "session %q is served by another node; retry", id).
		WithDetails("session_id", id, "owner_node", o.Node, "owner_addr", o.Addr)
}

// sessionIDOf returns the {id} of /api/sessions/{id}[/...] ("" for other paths, and for the two
// routes that name no session: POST /api/sessions/reattach and POST /api/sessions/import). A
// session may be named "import" or "reattach": its own routes are still session routes.
func sessionIDOf(method, p string) string {
	rest, ok := strings.CutPrefix(p, "/api/sessions/")
	if !ok {
		return ""
	}
	if method == http.MethodPost && (rest == "reattach" || rest == "import") {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// jupyterKernelID returns the {id} of /jupyter/[token/<t>/]api/kernels/{id}[/...] ("" otherwise).
// The kernel's REST calls and its channels websocket are served by the session's owner, so a
// JupyterLab pointed at any node talks to the one kernel that holds the state.
func jupyterKernelID(p string) string {
	rest, ok := strings.CutPrefix(p, "/jupyter/")
	if !ok {
		return ""
	}
	if t, ok := strings.CutPrefix(rest, "token/"); ok {
		_, rest, _ = strings.Cut(t, "/")
	}
	rest, ok = strings.CutPrefix(rest, "api/kernels/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// withPathToken returns r, or a copy carrying the token of a /jupyter/token/<t>/... path as a
// header (the form of clients that cannot send headers on a websocket), for the token check only:
// the request itself goes on unchanged, and the owner reads the token from the path again.
func withPathToken(r *http.Request) *http.Request {
	rest, ok := strings.CutPrefix(r.URL.Path, "/jupyter/token/")
	if !ok {
		return r
	}
	tok, _, _ := strings.Cut(rest, "/")
	c := r.Clone(r.Context())
	c.Header.Set("Authorization", "token "+tok)
	return c
}
