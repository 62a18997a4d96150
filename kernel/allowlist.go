package kernel

// allowlist.go parses an egress allowlist (LaunchSpec.NetworkAllow): the session service checks a
// create request with it, and kernel/sandbox's egress proxy enforces it.

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Allowlist is a parsed egress allowlist. Entries are "host" (ports 80 and 443), "host:port", or
// "*.domain" / "*.domain:port" (any subdomain, not the domain itself). A destination whose address
// is loopback, private, link-local, unspecified or multicast is refused unless an entry without a
// wildcard names its host (so "localhost:8080" reaches a test server, "*.example.com" never
// reaches 10.0.0.1 whatever the DNS says).
type Allowlist struct{ entries []allowEntry }

type allowEntry struct {
	host     string // lower case, no trailing dot; the domain for a wildcard
	wildcard bool
	port     int // 0: 80 and 443
}

// ParseAllowlist checks and parses entries; the error names the bad one.
func ParseAllowlist(entries []string) (*Allowlist, error) {
	a := &Allowlist{}
	for _, raw := range entries {
		e, err := parseEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("network.allow entry %q: %w", raw, err)
		}
		a.entries = append(a.entries, e)
	}
	return a, nil
}

func parseEntry(raw string) (allowEntry, error) {
	var e allowEntry
	s := strings.ToLower(strings.TrimSpace(raw))
	if strings.ContainsAny(s, "/@ ") {
		return e, errors.New("want host, host:port or *.domain (no scheme, path or user)")
	}
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return e, errors.New("bad port")
		}
		s, e.port = h, n
	}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		s, e.wildcard = rest, true
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" || strings.ContainsAny(s, "*/@ ") {
		return e, errors.New("want host, host:port or *.domain")
	}
	e.host = s
	return e, nil
}

// Match reports whether host:port is allowed, and whether an entry names host explicitly.
func (a *Allowlist) Match(host string, port int) (ok, explicit bool) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, e := range a.entries {
		if e.port == 0 && port != 80 && port != 443 || e.port != 0 && e.port != port {
			continue
		}
		if !e.wildcard && e.host == host {
			return true, true
		}
		if e.wildcard && strings.HasSuffix(host, "."+e.host) {
			ok = true
		}
	}
	return ok, false
}
