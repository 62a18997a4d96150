package kernel

import (
	"context"
	"encoding/json"
	"fmt"
)

// Eval runs code silently (no history, no broadcast of inputs or results) and returns the
// text/plain of the user expression expr ("" when expr is empty). A Python exception in code or
// in expr comes back as an error "EName: evalue". It is how the server drives agents it loaded
// into the kernel (persistence's snapshot agent satisfies its Executor interface with it).
func (k *Kernel) Eval(ctx context.Context, code, expr string) (string, error) {
	opts := ExecOptions{Silent: true}
	if expr != "" {
		opts.UserExpressions = map[string]string{"r": expr}
	}
	res, err := k.Execute(ctx, code, opts)
	if err != nil {
		return "", err
	}
	if res.Status != "ok" {
		return "", fmt.Errorf("%s: %s", res.EName, res.EValue)
	}
	if expr == "" {
		return "", nil
	}
	return UserExpressionText(res.UserExpressions["r"])
}

// UserExpressionText returns the text/plain of one user_expressions entry of an execute_reply, or
// an error "EName: evalue" when evaluating it raised.
func UserExpressionText(raw json.RawMessage) (string, error) {
	var ue struct {
		Status string            `json:"status"`
		Data   map[string]string `json:"data"`
		EName  string            `json:"ename"`
		EValue string            `json:"evalue"`
	}
	if len(raw) == 0 {
		return "", fmt.Errorf("kernel: no user expression in the reply")
	}
	if err := json.Unmarshal(raw, &ue); err != nil {
		return "", fmt.Errorf("kernel: user expression reply: %w", err)
	}
	if ue.Status != "ok" {
		return "", fmt.Errorf("%s: %s", ue.EName, ue.EValue)
	}
	return ue.Data["text/plain"], nil
}
