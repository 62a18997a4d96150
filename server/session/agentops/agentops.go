// Package agentops is what the session service asks of a kernel besides checkpoints: operations of
// the in-kernel agent (persistence/agent/carryover_agent/kernelops.py) called with JSON data (the
// output guard, a set-up, per-run env vars, the variable list, a page of a data frame). The Python
// is the agent's, tested with it, and no Go string builds code for the kernel.
package agentops

import (
	"context"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// agentOK is the answer of an agent op that only says it is done.
type agentOK struct {
	OK bool `json:"ok"`
}

// callAgent runs one agent op on k that answers {"ok": true}.
func callAgent(ctx context.Context, k *kernel.Kernel, op string, args any) error {
	var ok agentOK
	return persistence.CallAgent(ctx, k, op, args, &ok)
}

// OutputGuard is the call that has a fresh kernel cut what cells print into messages of at most 1
// MiB and drop what a cell prints past run.max_output_bytes inside the kernel (the agent's
// op_output_guard says why), for persistence's Install to run with the agent's install. The
// kernel's cap is a little under the server's own, so its notice still fits in what the server keeps.
func OutputGuard(maxOutput int64) persistence.AgentCall {
	return persistence.AgentCall{Op: "output_guard", Args: map[string]any{"cap": max(maxOutput-4096, 1024)}, Out: new(agentOK)}
}

// Setup applies a set-up (working dir, env vars, execution counter: the session's kernelSetup) with
// a request of its own.
func Setup(ctx context.Context, k *kernel.Kernel, setup any) error {
	return callAgent(ctx, k, "setup", setup)
}

// SetEnv applies per-run env vars; UnsetEnv puts the session's own back afterwards.
func SetEnv(ctx context.Context, k *kernel.Kernel, env map[string]string) error {
	vars := make(map[string]*string, len(env))
	for key, v := range env {
		vars[key] = &v
	}
	return callAgent(ctx, k, "env", map[string]any{"vars": vars})
}

// UnsetEnv removes the run's env vars from the kernel, or gives back the session's value (keep) of
// those the session has.
func UnsetEnv(ctx context.Context, k *kernel.Kernel, env, keep map[string]string) error {
	vars := make(map[string]*string, len(env))
	for key := range env {
		if v, ok := keep[key]; ok {
			vars[key] = &v
		} else {
			vars[key] = nil
		}
	}
	return callAgent(ctx, k, "env", map[string]any{"vars": vars})
}

// Variables asks an idle kernel for its namespace (the variable inspector's list).
func Variables(ctx context.Context, k *kernel.Kernel) ([]VariableInfo, error) {
	var vs []VariableInfo
	if err := persistence.CallAgent(ctx, k, "variables", map[string]any{}, &vs); err != nil {
		return nil, err
	}
	return vs, nil
}

// VariableInfo is one name of the session's namespace as the UI's variable inspector shows it.
type VariableInfo struct {
	Name   string `json:"name"`
	Type   string `json:"type,omitempty"`
	Shape  []int  `json:"shape,omitempty"`
	Length *int   `json:"length,omitempty"`
	Bytes  *int64 `json:"bytes,omitempty"` // in memory (nbytes, pandas memory_usage, deep up to 200,000 rows; sys.getsizeof, shallow)
	// State: "saved" (in the latest checkpoint), "skipped" (its checkpoint could not save it: Reason
	// says why) or "unsaved" (defined after the latest checkpoint).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}
