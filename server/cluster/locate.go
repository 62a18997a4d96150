package cluster

import (
	"context"
	"net/http"
)

// Locate is the router's decision for callers that are not plain HTTP routes (the MCP front door's
// tool calls): "" when this node serves session id (claimed here when nobody did), else the base
// URL of its owner to forward to. A call that already carries the hop header, or whose owner has
// no address, is not_owner (421 on the API), as in Wrap.
func (n *Node) Locate(ctx context.Context, id string, h http.Header) (string, error) {
	hopped := h.Get(HopHeader) != ""
	to, err := n.route(ctx, id, hopped)
	switch {
	case err != nil:
		return "", err
	case to.local:
		return "", nil
	case hopped || to.owner.Addr == "":
		return "", notOwner(id, to.owner)
	}
	return to.owner.Addr, nil
}

// ForwardHeader is what a call from this node to another carries: the hop header (so the owner
// never forwards it on) and the node-to-node token.
func (n *Node) ForwardHeader() http.Header {
	h := http.Header{}
	h.Set(HopHeader, n.o.Node.ID)
	h.Set(TokenHeader, n.o.Token)
	return h
}
