package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestUpdateDataWhileRead: runs that merge update_data into the session while others read the session
// (every answer encodes its data) must not share a map between writer and readers: under -race (make
// test) the old in-place merge was reported; without it, Go can abort on a concurrent map access.
// Every key of every run is there at the end.
func TestUpdateDataWhileRead(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "ud", Data: map[string]any{"seed": 1}})
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for ctx.Err() == nil {
				_, _ = ts.c.GetSession(ctx, "ud")
			}
		}()
	}
	const runs = 15
	for i := range runs {
		if _, err := ts.c.Run(context.Background(), "ud", client.RunRequest{Code: "1", UpdateData: map[string]any{fmt.Sprintf("k%d", i): i}}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	readers.Wait()
	s := ts.session("ud")
	if len(s.Data) != runs+1 {
		t.Fatalf("data after %d runs with update_data: %v", runs, s.Data)
	}
}
