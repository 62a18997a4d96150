package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/carryover/carryover/kernel"
)

// fixedDNS answers from a table: the test needs names that resolve to loopback, and no DNS server
// is reachable here.
type fixedDNS map[string]string

func (d fixedDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, ok := d[host]; ok {
		return []netip.Addr{netip.MustParseAddr(ip)}, nil
	}
	return nil, errors.New("no such host")
}

// TestProxyInternalAddresses: a wildcard entry never reaches a loopback or private address whatever
// the DNS says; an entry naming the host does.
func TestProxyInternalAddresses(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") }))
	defer up.Close()
	port := up.URL[strings.LastIndexByte(up.URL, ':')+1:]
	al, err := kernel.ParseAllowlist([]string{"*.corp.test:" + port, "named.test:" + port, "*.public.test"})
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(al, fixedDNS{"db.corp.test": "127.0.0.1", "named.test": "127.0.0.1", "x.public.test": "10.1.2.3"}, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	defer p.Close()
	proxyURL, _ := url.Parse("http://" + l.Addr().String())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	get := func(u string) (int, string) {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://named.test:" + port + "/"); code != 200 || body != "up" {
		t.Errorf("named host: %d %q", code, body)
	}
	for _, u := range []string{"http://db.corp.test:" + port + "/", "http://x.public.test/"} {
		if code, body := get(u); code != 403 || !strings.Contains(body, "internal address") {
			t.Errorf("%s: %d %q", u, code, body)
		}
	}
	if code, body := get("http://other.test/"); code != 403 || !strings.Contains(body, "not on this session's egress allowlist") {
		t.Errorf("unlisted: %d %q", code, body)
	}
	if p.Denied() != 3 {
		t.Errorf("denied count %d", p.Denied())
	}
}

func TestAllowlistMatch(t *testing.T) {
	al, err := kernel.ParseAllowlist([]string{"pypi.org", "*.githubusercontent.com", "localhost:8080", "Files.Example.COM."})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host         string
		port         int
		ok, explicit bool
	}{
		{"pypi.org", 443, true, true}, {"pypi.org", 80, true, true}, {"pypi.org", 22, false, false},
		{"raw.githubusercontent.com", 443, true, false}, {"githubusercontent.com", 443, false, false},
		{"localhost", 8080, true, true}, {"localhost", 8081, false, false}, {"files.example.com", 443, true, true},
		{"evilpypi.org", 443, false, false},
	}
	for _, c := range cases {
		if ok, ex := al.Match(c.host, c.port); ok != c.ok || ex != c.explicit {
			t.Errorf("%s:%d: %v %v, want %v %v", c.host, c.port, ok, ex, c.ok, c.explicit)
		}
	}
	for _, bad := range []string{"", "*", "https://pypi.org", "a:0", "a b", "user@host"} {
		if _, err := kernel.ParseAllowlist([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
