package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Executor runs Python silently in a session's kernel. The server adapts kernel.Kernel to it
// (kernel.Execute with Silent:true and UserExpressions), so persistence never imports kernel/.
type Executor interface {
	// Eval executes code silently; then returns the text/plain of the user expression expr (empty expr: "").
	// A Python exception in code or expr is returned as an error containing ename: evalue; one
	// that the kernel's interrupt raised wraps ErrInterrupted.
	Eval(ctx context.Context, code, expr string) (string, error)
}

// ErrInterrupted is an Executor's request that a kernel interrupt stopped. A user's interrupt is
// meant for a cell, but one sent as the cell ends lands in the turn's snapshot that follows it.
var ErrInterrupted = errors.New("interrupted")

// EnvDiff is how the kernel's os.environ differs from the one it started with.
type EnvDiff struct {
	Set   map[string]string `json:"set,omitempty"`
	Unset []string          `json:"unset,omitempty"`
}

func (e *EnvDiff) empty() bool { return e == nil || (len(e.Set) == 0 && len(e.Unset) == 0) }

// CallAgent runs one operation of the in-kernel agent with args (marshalled to JSON) and decodes its
// JSON answer into out. It is how the session service asks a kernel for anything besides checkpoints
// (set-up, env vars, output guard, variable list: carryover_agent/kernelops.py): it sends data, the
// code is the agent's.
func CallAgent(ctx context.Context, ex Executor, op string, args, out any) error {
	return callAgent(ctx, ex, op, args, out)
}

// callAgent runs one agent operation (see the spool protocol in checkpoint_spool.go) and decodes its
// JSON answer into out. The answer comes back as the text/plain of a user expression: the agent's
// JSONText repr is the raw JSON, so no Python-side quoting has to be undone.
func callAgent(ctx context.Context, ex Executor, op string, args, out any) error {
	a, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("agent %s: %w", op, err)
	}
	code := "__carryover__.call(" + pyString(op) + ", " + pyString(string(a)) + ")"
	text, err := ex.Eval(ctx, code, "__carryover__.take()")
	if err != nil {
		return fmt.Errorf("agent %s: %w", op, err)
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		return fmt.Errorf("agent %s: bad answer %.200q: %w", op, text, err)
	}
	return nil
}

// agentPing is the answer of the agent's ping: where its spool is, and which optional modules it has.
type agentPing struct {
	OK        bool   `json:"ok"`
	PID       int    `json:"pid"`
	Spool     string `json:"spool"`
	SpoolHost string `json:"spool_host"`
	XXHash    bool   `json:"xxhash"`
	Zstd      bool   `json:"zstd"`
	Dill      bool   `json:"dill"`
}
