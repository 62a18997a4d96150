package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/faultproxy"
)

// TestIdempotentExecute: POST /api/execute honours an Idempotency-Key. The client's connection is
// reset while the code runs; its retry (same key) gets the first attempt's answer, not a second
// run (the code prints a random number: a second run would print another). The same key again is
// the stored answer, marked replayed; with another body it is refused; another tenant's same key
// is its own.
func TestIdempotentExecute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := startServer(t, "")
	proxy, err := faultproxy.Start(strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	var sends atomic.Int32
	pc := client.New("http://"+proxy.Addr(), testToken, client.WithHTTPClient(&http.Client{Transport: countingTransport{"/execute", &sends}}))
	key := client.NewIdempotencyKey()
	code := "import random, time\nv = random.random()\ntime.sleep(1.5)\nprint(v)"
	done := make(chan struct {
		res *client.RunResult
		err error
	}, 1)
	go func() {
		res, err := pc.Execute(ctx, client.ExecuteRequest{Code: code, IdempotencyKey: key})
		done <- struct {
			res *client.RunResult
			err error
		}{res, err}
	}()
	time.Sleep(700 * time.Millisecond) // the code runs (a kernel from the warm pool): cut under it
	proxy.ResetAll()
	a := <-done
	if a.err != nil || a.res.Status != "ok" || a.res.Stdout == "" {
		t.Fatalf("execute through a cut connection: %+v %v", a.res, a.err)
	}
	if n := sends.Load(); n < 2 {
		t.Fatalf("%d sends of the execute: the connection was not cut under it", n)
	}
	var replayed string
	rc := client.New(ts.base, testToken, client.WithHTTPClient(&http.Client{Transport: replayedTransport{&replayed}}))
	again, err := rc.Execute(ctx, client.ExecuteRequest{Code: code, IdempotencyKey: key})
	if err != nil || again.Stdout != a.res.Stdout || replayed != "true" {
		t.Fatalf("the key again: %+v %v (Idempotent-Replayed %q), want %q replayed", again, err, replayed, a.res.Stdout)
	}
	_, err = ts.c.Execute(ctx, client.ExecuteRequest{Code: "print('other')", IdempotencyKey: key})
	if client.ErrorCode(err) != client.CodeIdempotencyKeyReused {
		t.Fatalf("the key with another body: %v, want idempotency_key_reused", err)
	}
	// Without a key of its own the client draws one per call: two calls, two runs.
	one, err1 := ts.c.Execute(ctx, client.ExecuteRequest{Code: "import random; print(random.random())"})
	two, err2 := ts.c.Execute(ctx, client.ExecuteRequest{Code: "import random; print(random.random())"})
	if err1 != nil || err2 != nil || one.Stdout == two.Stdout {
		t.Fatalf("two calls without a key: %+v %v / %+v %v, want two runs", one, err1, two, err2)
	}
}
