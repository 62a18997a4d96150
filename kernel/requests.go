package kernel

import (
	"context"
	"encoding/json"
	"fmt"
)

// CompleteReply is the content of complete_reply.
type CompleteReply struct {
	Matches     []string                   `json:"matches"`
	CursorStart int                        `json:"cursor_start"`
	CursorEnd   int                        `json:"cursor_end"`
	Metadata    map[string]json.RawMessage `json:"metadata"`
}

// InspectReply is the content of inspect_reply.
type InspectReply struct {
	Found bool                       `json:"found"`
	Data  map[string]json.RawMessage `json:"data"`
}

// replyStatus is the common part of every reply: status and, on error, the exception.
type replyStatus struct {
	Status string `json:"status"`
	EName  string `json:"ename"`
	EValue string `json:"evalue"`
}

func (r replyStatus) err() error {
	if r.Status == "error" {
		return fmt.Errorf("kernel replied error: %s: %s", r.EName, r.EValue)
	}
	return nil
}

// Complete asks for completions at cursorPos (in Unicode code points, as protocol 5.2+ counts).
// It queues behind a running execute on the kernel side.
func (k *Kernel) Complete(ctx context.Context, code string, cursorPos int) (*CompleteReply, error) {
	inst, err := k.live(ctx)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: complete: %w", k.id, err)
	}
	m, err := k.request(ctx, inst, chShell, "complete_request", map[string]any{"code": code, "cursor_pos": cursorPos}, "complete_reply")
	if err != nil {
		return nil, fmt.Errorf("kernel %s: complete: %w", k.id, err)
	}
	var rep struct {
		replyStatus
		CompleteReply
	}
	if err := json.Unmarshal(m.Content, &rep); err != nil {
		return nil, fmt.Errorf("kernel %s: complete_reply: %w", k.id, err)
	}
	if err := rep.err(); err != nil {
		return nil, fmt.Errorf("kernel %s: complete: %w", k.id, err)
	}
	return &rep.CompleteReply, nil
}

// Inspect asks for help on the object at cursorPos (detailLevel 0 or 1, like ? and ??).
func (k *Kernel) Inspect(ctx context.Context, code string, cursorPos, detailLevel int) (*InspectReply, error) {
	inst, err := k.live(ctx)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: inspect: %w", k.id, err)
	}
	m, err := k.request(ctx, inst, chShell, "inspect_request", map[string]any{"code": code, "cursor_pos": cursorPos, "detail_level": detailLevel}, "inspect_reply")
	if err != nil {
		return nil, fmt.Errorf("kernel %s: inspect: %w", k.id, err)
	}
	var rep struct {
		replyStatus
		InspectReply
	}
	if err := json.Unmarshal(m.Content, &rep); err != nil {
		return nil, fmt.Errorf("kernel %s: inspect_reply: %w", k.id, err)
	}
	if err := rep.err(); err != nil {
		return nil, fmt.Errorf("kernel %s: inspect: %w", k.id, err)
	}
	return &rep.InspectReply, nil
}

// request sends one request on ch and waits for the reply of replyType with it as parent.
func (k *Kernel) request(ctx context.Context, inst *instance, ch channelKind, msgType string, content any, replyType string) (*message, error) {
	w := newWaiter(false)
	h, err := inst.send(ch, msgType, nil, content, w)
	if err != nil {
		return nil, err
	}
	defer inst.unregister(h.MsgID)
	var buf []event
	for {
		select {
		case <-w.notify:
			buf = w.take(buf)
			for _, e := range buf {
				if e.ch == ch && e.msg.Header.MsgType == replyType {
					return e.msg, nil
				}
			}
		case <-inst.dead:
			return nil, inst.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
