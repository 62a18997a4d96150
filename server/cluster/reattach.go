package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/carryover/carryover"
)

const reattachPath = "/api/sessions/reattach"

// maxReattachBody bounds what the router reads of a reattach body ({"client_id": ...}).
const maxReattachBody = 64 << 10

// reattachID is the session a reattach call names through its client_id, found in the shared
// store, so the call goes to that session's owner; "" when it cannot tell (bad body, no such
// client): the API then answers it here with its own error. The body is put back for the API.
func (n *Node) reattachID(r *http.Request, tenant string) string {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxReattachBody+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body} // the rest, if any, for the API's own limit
	if err != nil || len(b) > maxReattachBody {
		return ""
	}
	var req struct {
		ClientID string `json:"client_id"`
	}
	if json.Unmarshal(b, &req) != nil || req.ClientID == "" {
		return ""
	}
	id, err := n.o.Sessions.ReattachTarget(carryover.NewContextWithTenant(r.Context(), tenant), req.ClientID)
	if err != nil {
		return ""
	}
	return id
}
