// Package client is a typed Go client of carryover's HTTP and websocket API (docs/api.md, with its
// extensions).
//
// It exists so that programs (the server's own tests and benchmark, a CLI, agents) talk to
// carryover through named fields instead of map[string]any: a renamed field then breaks a build,
// not a run. It depends only on the standard library and gorilla/websocket, never on the server's
// packages, so it describes the wire contract and nothing else.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// Client talks to one carryover server with one token. It is safe for concurrent use.
type Client struct {
	baseURL string
	token   string
	hc      *http.Client
	dialer  *websocket.Dialer
	retry   RetryPolicy // retry.go
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc (timeouts, transports, proxies).
// The default is a client without a timeout: runs may last as long as their timeout_seconds, so
// deadlines belong to each call's context.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithDialer sets the websocket dialer used by Connect.
func WithDialer(d *websocket.Dialer) Option {
	return func(c *Client) {
		if d != nil {
			c.dialer = d
		}
	}
}

// New returns a Client of the server at baseURL (e.g. "http://127.0.0.1:8080") that sends token as
// "Authorization: Bearer <token>".
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token,
		hc: &http.Client{}, dialer: websocket.DefaultDialer, retry: DefaultRetryPolicy}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the server address the client was built with.
func (c *Client) BaseURL() string { return c.baseURL }

// Do sends one request and decodes the answer; it is what every typed method uses, and the way to
// reach an endpoint this package does not wrap yet.
//
// path is relative to the base URL and may carry a query ("/api/sessions?x=1"). body is sent as
// JSON, except nil (no body), []byte and io.Reader (sent raw). out receives the answer: nil
// discards it, a *[]byte gets the raw bytes, an io.Writer has them copied in, anything else is
// JSON-decoded. A non-2xx answer is
// returned as an *Error. Failures of the connection and 421/503/429 answers are retried as
// retry.go says (an io.Reader body is sent once).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	return c.DoWithHeader(ctx, method, path, nil, body, out)
}

// DoWithHeader is Do with extra request headers (an Idempotency-Key, say).
func (c *Client) DoWithHeader(ctx context.Context, method, path string, header http.Header, body, out any) error {
	_, streamed := body.(io.Reader)
	r := retrier{p: c.retry, start: time.Now()}
	var resp *http.Response
	for {
		req, err := c.newRequest(ctx, method, path, body)
		if err != nil {
			return err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err = c.hc.Do(req)
		if err == nil && !retryableStatus(resp.StatusCode, resp.Header) {
			break
		}
		if !r.again(ctx, req, resp, err, !streamed) {
			if err != nil {
				return err
			}
			break
		}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp)
	}
	return decodeBody(resp, out)
}

// newRequest builds an authenticated request.
func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	r, contentType, err := encodeBody(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, r)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// encodeBody turns a Do body into a reader and its content type.
func encodeBody(body any) (io.Reader, string, error) {
	switch b := body.(type) {
	case nil:
		return nil, "", nil
	case []byte:
		return bytes.NewReader(b), "application/octet-stream", nil
	case io.Reader:
		return b, "application/octet-stream", nil
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, "", fmt.Errorf("client: encoding request: %w", err)
	}
	return bytes.NewReader(data), "application/json", nil
}

// decodeBody reads a 2xx answer into out (see Do).
func decodeBody(resp *http.Response, out any) error {
	switch o := out.(type) {
	case nil:
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	case *[]byte:
		data, err := io.ReadAll(resp.Body)
		*o = data
		return err
	case io.Writer: // streamed: a session archive
		_, err := io.Copy(o, resp.Body)
		return err
	}
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: decoding %s answer: %w", resp.Request.URL.Path, err)
	}
	return nil
}

// sessionPath is /api/sessions/{id} followed by more path segments, each escaped.
func sessionPath(id string, more ...string) string {
	p := "/api/sessions/" + url.PathEscape(id)
	for _, m := range more {
		p += "/" + url.PathEscape(m)
	}
	return p
}

// healthAnswer is the answer of GET /healthz.
type healthAnswer struct {
	Status string `json:"status"`
}

// Health checks GET /healthz (no token needed); nil means the server answered {"status": "ok"}.
func (c *Client) Health(ctx context.Context) error {
	var out healthAnswer
	if err := c.Do(ctx, http.MethodGet, "/healthz", nil, &out); err != nil {
		return err
	}
	if out.Status != "ok" {
		return fmt.Errorf("client: health status is %q", out.Status)
	}
	return nil
}

// Metrics fetches GET /metrics (no token needed): the server's Prometheus metrics, in the text
// exposition format.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var data []byte
	if err := c.Do(ctx, http.MethodGet, "/metrics", nil, &data); err != nil {
		return "", err
	}
	return string(data), nil
}
