package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/carryover/carryover/client"
)

// closedIdleOnce fails the first request as net/http does when the pooled connection it went out
// on had been closed by the server (a kill -9 of the server: the chaos harness found it), then
// passes requests on.
type closedIdleOnce struct {
	n     atomic.Int32
	inner http.RoundTripper
}

func (c *closedIdleOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.n.Add(1) == 1 {
		return nil, errors.New("http: server closed idle connection")
	}
	return c.inner.RoundTrip(r)
}

// TestRetryServerClosedIdle: a keyed run whose pooled connection the server had closed is sent
// again (its key makes the retry safe) instead of failing the call.
func TestRetryServerClosedIdle(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok","stdout":"1\n","execution_count":1}`))
	}))
	defer srv.Close()
	rt := &closedIdleOnce{inner: http.DefaultTransport}
	c := client.New(srv.URL, "tok", client.WithHTTPClient(&http.Client{Transport: rt}))
	res, err := c.Execute(context.Background(), client.ExecuteRequest{Code: "print(1)"})
	if err != nil || res.Stdout != "1\n" || rt.n.Load() != 2 {
		t.Fatalf("execute after a closed idle connection: %+v %v, %d attempts; want the answer after 2", res, err, rt.n.Load())
	}
}
