package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// flaky answers status (with Retry-After retryAfter) to the first fails requests, then 200 {}; it
// records each request's Idempotency-Key.
func flaky(t *testing.T, fails int32, status int, retryAfter string) (*httptest.Server, *atomic.Int32, *[]string) {
	var n atomic.Int32
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if n.Add(1) <= fails {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":{"code":"x","message":"not now"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok","stdout":"hi"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n, &keys
}

func TestRetryUnservedAnswers(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusMisdirectedRequest, http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		srv, n, keys := flaky(t, 2, status, "0")
		res, err := client.New(srv.URL, "t").Run(context.Background(), "s", client.RunRequest{Code: "1"})
		if err != nil || res.Stdout != "hi" || n.Load() != 3 {
			t.Fatalf("%d twice then 200: %+v %v after %d requests", status, res, err, n.Load())
		}
		if k := *keys; k[0] == "" || k[0] != k[1] || k[1] != k[2] {
			t.Fatalf("%d: keys %q, want one key sent with every attempt", status, k)
		}
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	srv, n, _ := flaky(t, 1, http.StatusTooManyRequests, "1")
	start := time.Now()
	if _, err := client.New(srv.URL, "t").Run(context.Background(), "s", client.RunRequest{Code: "1"}); err != nil {
		t.Fatal(err)
	}
	// Retry-After: 1 is a floor the backoff (100 ms first) would not reach: a lower bound, not a timing claim.
	if waited := time.Since(start); waited < time.Second || n.Load() != 2 {
		t.Fatalf("retried after %v (%d requests), want after Retry-After's 1 s", waited, n.Load())
	}
}

// TestRetryNotOwnerAtOnce: a 421 not_owner says the session just moved (a node drained or died): the
// first retry goes at once, not after the backoff (here 10 s, which the old client waited 5-10 s of),
// and a second 421 backs off as usual.
func TestRetryNotOwnerAtOnce(t *testing.T) {
	t.Parallel()
	slow := client.WithRetry(client.RetryPolicy{MaxAttempts: 5, MaxElapsed: time.Minute, BaseDelay: 10 * time.Second, MaxDelay: 10 * time.Second})
	srv, n, _ := flaky(t, 1, http.StatusMisdirectedRequest, "")
	start := time.Now()
	if _, err := client.New(srv.URL, "t", slow).Run(context.Background(), "s", client.RunRequest{Code: "1"}); err != nil || n.Load() != 2 {
		t.Fatalf("421 then 200: %v after %d requests", err, n.Load())
	}
	if waited := time.Since(start); waited >= 5*time.Second {
		t.Fatalf("the retry after a 421 waited %v: want it at once (the backoff is 5-10 s)", waited)
	}
	srv, n, _ = flaky(t, 1, http.StatusServiceUnavailable, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := client.New(srv.URL, "t", slow).Run(ctx, "s", client.RunRequest{Code: "1"}); err == nil || n.Load() != 1 {
		t.Fatalf("503: %v after %d requests; want the backoff (5-10 s) to outlast the 2 s context", err, n.Load())
	}
}

func TestRetryLeavesOtherAnswersAlone(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusConflict, http.StatusInternalServerError, http.StatusBadGateway} {
		srv, n, _ := flaky(t, 5, status, "")
		_, err := client.New(srv.URL, "t").Run(context.Background(), "s", client.RunRequest{Code: "1"})
		if err == nil || n.Load() != 1 {
			t.Fatalf("%d: %v after %d requests, want the error at once", status, err, n.Load())
		}
	}
	// Turned off, and a streamed body (which cannot be sent twice).
	srv, n, _ := flaky(t, 5, http.StatusServiceUnavailable, "")
	_, err := client.New(srv.URL, "t", client.WithRetry(client.RetryPolicy{MaxAttempts: 1})).Run(context.Background(), "s", client.RunRequest{Code: "1"})
	if err == nil || n.Load() != 1 {
		t.Fatalf("MaxAttempts 1: %v after %d requests", err, n.Load())
	}
	srv, n, _ = flaky(t, 5, http.StatusServiceUnavailable, "")
	err = client.New(srv.URL, "t").Do(context.Background(), http.MethodPut, "/x", strings.NewReader("body"), nil)
	if err == nil || n.Load() != 1 {
		t.Fatalf("a streamed body: %v after %d requests", err, n.Load())
	}
}

func TestRetryRidesOutARefusedConnection(t *testing.T) {
	t.Parallel()
	// A port nobody listens on yet; the server comes up on it after a while.
	ln := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ok","stdout":"up"}`))
	}))
	addr := ln.Listener.Addr().String()
	ln.Listener.Close()
	go func() {
		time.Sleep(300 * time.Millisecond)
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		ln.Listener = l
		ln.Start()
	}()
	t.Cleanup(func() { ln.Close() })
	res, err := client.New("http://"+addr, "t").Run(context.Background(), "s", client.RunRequest{Code: "1"})
	if err != nil || res.Stdout != "up" {
		t.Fatalf("through a refused connection: %+v %v", res, err)
	}
}
