package sandbox

// egress.go is the filtering HTTP(S) proxy of a box with an egress allowlist (BoxOptions.Allow).
// Such a box has a network namespace of its own with nothing but loopback (netns.go); the server
// listens on 127.0.0.1:ProxyPort INSIDE that namespace (the socket was made there, the goroutines
// serving it run in the server), and the box's HTTP_PROXY/HTTPS_PROXY point at it. There is no
// route out, no DNS and no other listener, so the proxy is the only way out: it resolves names
// itself, checks the allowlist and the resolved addresses, and dials the checked address (no second
// lookup a DNS rebinding could change). CONNECT tunnels carry HTTPS (pip, requests, curl, git);
// absolute-form requests carry plain HTTP.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/carryover/carryover/kernel"
)

// ProxyPort is where a box's proxy listens on its loopback.
const ProxyPort = 3128

// internal reports addresses a wildcard entry must never reach.
func internal(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip) // carrier-grade NAT, often cloud-internal
}

// Resolver looks a host up (net.DefaultResolver in production).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Proxy is one box's egress proxy.
type Proxy struct {
	allow    *kernel.Allowlist
	resolver Resolver
	log      *slog.Logger
	srv      *http.Server
	mu       sync.Mutex
	denied   int
}

// NewProxy returns a proxy for allow (Serve starts it).
func NewProxy(allow *kernel.Allowlist, r Resolver, log *slog.Logger) *Proxy {
	if r == nil {
		r = net.DefaultResolver
	}
	if log == nil {
		log = slog.Default()
	}
	p := &Proxy{allow: allow, resolver: r, log: log}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	return p
}

// Serve serves l until Close.
func (p *Proxy) Serve(l net.Listener) { _ = p.srv.Serve(l) }

// Close stops the listener and every open connection.
func (p *Proxy) Close() error { return p.srv.Close() }

// Denied counts refused requests.
func (p *Proxy) Denied() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.denied
}

// dial checks host:port against the allowlist, resolves it and dials the first checked address.
func (p *Proxy) dial(ctx context.Context, hostport string) (net.Conn, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("bad destination %q", hostport)
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", hostport)
	}
	ok, explicit := p.allow.Match(host, port)
	if !ok {
		return nil, fmt.Errorf("%s is not on this session's egress allowlist (sandbox.network.allow)", hostport)
	}
	ips, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("cannot resolve %s: %v", host, err)
	}
	var errs []error
	for _, ip := range ips {
		if internal(ip) && !explicit {
			errs = append(errs, fmt.Errorf("%s resolves to %s, an internal address only an entry naming %s itself may reach", host, ip, host))
			continue
		}
		d := net.Dialer{Timeout: 15 * time.Second}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip.Unmap().String(), ps))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// ServeHTTP handles CONNECT (tunnels) and absolute-form requests (plain HTTP).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "carryover egress proxy: only CONNECT and absolute http:// requests", http.StatusBadRequest)
		return
	}
	hostport := r.URL.Host
	if r.URL.Port() == "" {
		hostport = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	t := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return p.dial(ctx, hostport) },
		DisableKeepAlives: true}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	out.Header.Del("Proxy-Connection")
	resp, err := t.RoundTrip(out)
	if err != nil {
		p.refuse(w, r, err)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	up, err := p.dial(r.Context(), r.Host)
	if err != nil {
		p.refuse(w, r, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijacking", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	_, _ = down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	go func() {
		if n := buf.Reader.Buffered(); n > 0 { // bytes the client sent after the request line
			b, _ := buf.Reader.Peek(n)
			_, _ = up.Write(b)
		}
		_, _ = io.Copy(up, down)
		closeWrite(up)
	}()
	_, _ = io.Copy(down, up)
	closeWrite(down)
	down.Close()
	up.Close()
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
}

// refuse answers 403 with the reason, which clients show ("Tunnel connection failed: 403 ...").
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, err error) {
	p.mu.Lock()
	p.denied++
	p.mu.Unlock()
	p.log.Info("sandbox egress refused", "method", r.Method, "host", r.Host, "err", err)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Carryover-Egress", "denied")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, "carryover egress proxy: "+err.Error()+"\n")
}

// setupEgress parses the allowlist, makes the box's namespace and starts its proxy.
func (b *Box) setupEgress(allow []string) error {
	al, err := kernel.ParseAllowlist(allow)
	if err != nil {
		return err
	}
	ns, l, err := newNetns(ProxyPort)
	if err != nil {
		return err
	}
	b.ns, b.proxy = ns, NewProxy(al, nil, b.m.log.With("box", b.name))
	go b.proxy.Serve(l)
	return nil
}

// Proxy is the box's egress proxy (nil without an allowlist).
func (b *Box) Proxy() *Proxy { return b.proxy }

// proxyEnv adds the proxy variables to env when the box has an allowlist. Both spellings: curl
// reads only the lower-case http_proxy, Python and pip read either.
func (b *Box) proxyEnv(env map[string]string) map[string]string {
	if b.proxy == nil {
		return env
	}
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	u := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	for _, k := range []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"} {
		out[k] = u
	}
	return out
}

// Start starts the wrapper of a Command of this box (argv from Box.Command) in the box's network
// namespace when it has one of its own making (an allowlist), else as kernel.StartProcess does.
func (b *Box) Start(spec kernel.ProcessSpec) (p *kernel.LocalProcess, err error) {
	err = inNetns(b.ns, func() error {
		p, err = kernel.StartProcess(spec)
		return err
	})
	return p, err
}
