package httpapi

import (
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/carryover/carryover"
)

// keyRoutes manage the API keys of every tenant (admin scope, routeScopes): create one (its secret
// is in that answer only), list them (never a secret), revoke one.
func (a *API) keyRoutes() []route {
	return []route{
		{"POST /api/admin/keys", http.HandlerFunc(a.createKey)},
		{"GET /api/admin/keys", http.HandlerFunc(a.listKeys)},
		{"DELETE /api/admin/keys/{id}", http.HandlerFunc(a.revokeKey)},
	}
}

// CreateKeyRequest is the body of POST /api/admin/keys.
type CreateKeyRequest struct {
	Tenant    string     `json:"tenant"`
	Scope     string     `json:"scope"`
	Name      string     `json:"name,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// createdKey is the answer of a create: the key as listed, and its secret, once.
type createdKey struct {
	carryover.APIKey
	Secret string `json:"secret"`
}

func (a *API) createKey(w http.ResponseWriter, r *http.Request) {
	if a.keys == nil {
		a.fail(w, r, carryover.Errorf(carryover.CodeInvalid, "this server keeps no API keys"))
		return
	}
	var req CreateKeyRequest
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := req.validate(time.Now()); err != nil {
		a.fail(w, r, err)
		return
	}
	k, secret, err := carryover.NewKey(req.Tenant, carryover.Scope(req.Scope), req.Name, req.ExpiresAt)
	if err == nil {
		err = a.keys.store.CreateKey(r.Context(), k)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("API key created", "key_id", k.ID, "tenant", k.Tenant, "scope", k.Scope)
	w.Header().Set("Cache-Control", "no-store") // the answer holds a secret
	writeJSON(w, http.StatusCreated, createdKey{APIKey: k, Secret: secret})
}

// validate checks a create request: a tenant name, a known scope, an expiry in the future.
func (req *CreateKeyRequest) validate(now time.Time) error {
	switch {
	case strings.TrimSpace(req.Tenant) == "" || len(req.Tenant) > 128 || strings.IndexFunc(req.Tenant, unicode.IsControl) >= 0:
		return carryover.Errorf(carryover.CodeInvalid, "tenant must be a name of 1 to 128 characters without control characters").WithDetails("field", "tenant")
	case !carryover.Scope(req.Scope).Valid():
		return carryover.Errorf(carryover.CodeInvalid, "scope must be one of read, run, tenant, admin, not %q", req.Scope).WithDetails("field", "scope")
	case len(req.Name) > 200 || strings.IndexFunc(req.Name, unicode.IsControl) >= 0:
		return carryover.Errorf(carryover.CodeInvalid, "name must be at most 200 characters without control characters").WithDetails("field", "name")
	case req.ExpiresAt != nil && !req.ExpiresAt.After(now):
		return carryover.Errorf(carryover.CodeInvalid, "expires_at must be in the future").WithDetails("field", "expires_at")
	}
	if req.ExpiresAt != nil {
		t := req.ExpiresAt.UTC().Round(0)
		req.ExpiresAt = &t
	}
	return nil
}

// listKeys lists the keys, of one tenant with ?tenant=.
func (a *API) listKeys(w http.ResponseWriter, r *http.Request) {
	if a.keys == nil {
		writeJSON(w, 200, map[string]any{"keys": []carryover.APIKey{}})
		return
	}
	keys, err := a.keys.store.ListKeys(r.Context(), r.URL.Query().Get("tenant"))
	a.reply(w, r, 200, map[string]any{"keys": keys}, err)
}

// revokeKey deletes a key -> 204. This node forgets it at once, the others within keyCacheTTL.
func (a *API) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if a.keys == nil {
		a.fail(w, r, carryover.Errorf(carryover.CodeNotFound, "key %q not found", id).WithDetails("key_id", id))
		return
	}
	if err := a.keys.store.DeleteKey(r.Context(), id); err != nil {
		a.fail(w, r, err)
		return
	}
	a.keys.forget(id)
	a.log.Info("API key revoked", "key_id", id)
	w.WriteHeader(http.StatusNoContent)
}
