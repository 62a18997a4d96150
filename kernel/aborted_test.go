package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRetryAbortedRequest: the abort window is ipykernel's. A cell sent raw with stop_on_error raises while carryover's next
// request waits in the kernel's queue; ipykernel aborts that request. kernel.Eval then fails with
// an empty "ename: evalue" (the fault the checkpoints had); RetryAborted sends it again and gets
// the answer.
func TestRetryAbortedRequest(t *testing.T) {
	spec, err := FindSpec("python3", "/usr/bin/python3")
	if err != nil {
		t.Fatalf("Debian's python3 kernelspec: %v", err)
	}
	dir, err := os.MkdirTemp("", "coab") // short: ipc socket paths must stay under 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := Start(ctx, Options{Spec: spec, RuntimeDir: dir, StartupTimeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	raise := func(n int) {
		h, _ := json.Marshal(map[string]any{"msg_id": "raise-" + string(rune('a'+n)), "msg_type": "execute_request",
			"session": "test", "username": "test", "version": "5.3", "date": time.Now().UTC().Format(time.RFC3339)})
		c, _ := json.Marshal(map[string]any{"code": "import time; time.sleep(0.3); 1/0", "silent": false, "store_history": true,
			"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
		if err := k.SendRaw(ctx, "shell", RawMessage{Channel: "shell", Header: h, Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	raise(0)
	if _, err := k.Eval(ctx, "", "1+1"); err == nil || strings.TrimSpace(err.Error()) != ":" {
		t.Fatalf("plain Eval behind a raising cell: %v, want the empty error of an aborted request", err)
	}
	raise(1)
	if got, err := (RetryAborted{Kernel: k, Interrupted: errors.New("interrupted")}).Eval(ctx, "", "1+1"); err != nil || got != "2" {
		t.Fatalf("RetryAborted behind a raising cell = %q, %v; want 2", got, err)
	}
}
