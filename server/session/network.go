package session

import (
	"bytes"
	"encoding/json"
	"errors"
)

// NetworkRequest is a create request's sandbox.network: true or false, or {"allow": ["host",
// "*.domain", "host:port", ...]} for an egress allowlist (kernel/sandbox/egress.go).
type NetworkRequest struct {
	Full  bool     // true: the host's network
	Allow []string // not nil: only these destinations, through the server's proxy
}

// UnmarshalJSON accepts a boolean or an object with exactly an "allow" list of strings.
func (n *NetworkRequest) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &n.Full); err == nil {
		return nil
	}
	var o struct {
		Allow *[]string `json:"allow"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&o); err != nil || o.Allow == nil {
		return errors.New(`sandbox.network must be true, false or {"allow": ["host", "*.domain", "host:port"]}`)
	}
	n.Allow = *o.Allow
	if n.Allow == nil {
		n.Allow = []string{}
	}
	return nil
}
