package kernel

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// rawHeader builds a header as a Jupyter front end would (its own session and msg_id).
func rawHeader(msgType, id string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"msg_id": id, "session": "frontend", "username": "nb",
		"date": time.Now().UTC().Format(dateLayout), "msg_type": msgType, "version": protocolVersion})
	return b
}

// nextRaw waits for the next message on ch whose parent is parentID ("*": any) and type is msgType.
func nextRaw(t *testing.T, ch <-chan RawMessage, parentID, msgType string) RawMessage {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed waiting for %s", msgType)
			}
			var h, p header
			if err := json.Unmarshal(m.Header, &h); err != nil {
				t.Fatalf("header %s: %v", m.Header, err)
			}
			_ = json.Unmarshal(m.ParentHeader, &p)
			if (p.MsgID == parentID || parentID == "*") && h.MsgType == msgType {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s for %s", msgType, parentID)
		}
	}
}

// TestRaw sends a kernel_info_request raw on shell and receives the reply and the iopub status
// messages raw, while the parsed path keeps working beside it.
func TestRaw(t *testing.T) {
	k := startKernel(t, testOptions(t, "ipc"))
	shell, cancelShell, err := k.Subscribe("shell")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelShell()
	iopub, cancelIOPub, err := k.Subscribe("iopub")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelIOPub()

	id := "raw-kernel-info-1"
	if err := k.SendRaw(context.Background(), "shell", RawMessage{Header: rawHeader("kernel_info_request", id)}); err != nil {
		t.Fatal(err)
	}
	reply := nextRaw(t, shell, id, "kernel_info_reply")
	var info KernelInfo
	if err := json.Unmarshal(reply.Content, &info); err != nil || info.Status != "ok" || info.LanguageInfo.Name != "python" {
		t.Errorf("reply content %s: %v", reply.Content, err)
	}
	if reply.Channel != "shell" || string(reply.Metadata) == "" {
		t.Errorf("reply channel %q metadata %q", reply.Channel, reply.Metadata)
	}
	for _, state := range []string{"busy", "idle"} {
		m := nextRaw(t, iopub, id, "status")
		var c struct {
			State string `json:"execution_state"`
		}
		if err := json.Unmarshal(m.Content, &c); err != nil || c.State != state {
			t.Errorf("status %s, want %s", m.Content, state)
		}
	}

	// The parsed path still gets its replies, and the raw subscriber sees them too.
	r := mustRun(t, k, "print(6*7)")
	if got := r.text("stream"); got != "42\n" {
		t.Errorf("parsed execute: %q", got)
	}
	nextRaw(t, shell, "*", "execute_reply")

	// Raw execute with buffers-free content; the stream output arrives raw on iopub.
	code, _ := json.Marshal(map[string]any{"code": "print('raw')", "silent": false})
	if err := k.SendRaw(context.Background(), "shell", RawMessage{Header: rawHeader("execute_request", "raw-exec-1"), Content: code}); err != nil {
		t.Fatal(err)
	}
	m := nextRaw(t, iopub, "raw-exec-1", "stream")
	if string(m.Content) == "" || !json.Valid(m.Content) {
		t.Errorf("stream content %q", m.Content)
	}
	nextRaw(t, shell, "raw-exec-1", "execute_reply")

	// Cancel closes the channel.
	cancelIOPub()
	for range iopub {
	}
}

func TestRawErrors(t *testing.T) {
	k := startKernel(t, testOptions(t, "ipc"))
	ctx := context.Background()
	for _, ch := range []string{"hb", "nope", "", "iopub"} {
		if err := k.SendRaw(ctx, ch, RawMessage{Header: rawHeader("kernel_info_request", "x")}); err == nil {
			t.Errorf("SendRaw on %q: no error", ch)
		}
	}
	for _, ch := range []string{"hb", "nope", ""} {
		if _, _, err := k.Subscribe(ch); err == nil {
			t.Errorf("Subscribe(%q): no error", ch)
		}
	}
	for i, m := range []RawMessage{{}, {Header: json.RawMessage(`[1]`)}, {Header: rawHeader("kernel_info_request", "y"), Content: json.RawMessage(`"x"`)}} {
		if err := k.SendRaw(ctx, "shell", m); err == nil {
			t.Errorf("message %d: no error", i)
		}
	}
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k.SendRaw(ctx, "control", RawMessage{Header: rawHeader("kernel_info_request", "z")}); err == nil {
		t.Error("SendRaw after Shutdown: no error")
	}
}
