package session

// agentops.go: what the service asks of a kernel besides checkpoints goes through the in-kernel
// agent (persistence/agent/carryover_agent/kernelops.py) as operations called with JSON data: the
// Python is the agent's, tested with it, and no Go string builds code for the kernel.

import (
	"context"
	"fmt"

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

// installOutputGuard has a fresh kernel cut what cells print into messages of at most 1 MiB and drop
// what a cell prints past run.max_output_bytes inside the kernel (the agent's op_output_guard says
// why). The kernel's cap is a little under the server's own, so its notice still fits in what the
// server keeps.
func installOutputGuard(ctx context.Context, k *kernel.Kernel, maxOutput int64) error {
	kcap := max(maxOutput-4096, 1024)
	if err := callAgent(ctx, k, "output_guard", map[string]any{"cap": kcap}); err != nil {
		return fmt.Errorf("output guard: %w", err)
	}
	return nil
}

// sendSetup applies a set-up (working dir, env vars, execution counter) with a request of its own.
func sendSetup(ctx context.Context, k *kernel.Kernel, st kernelSetup) error {
	return callAgent(ctx, k, "setup", st)
}

// setEnv applies per-run env vars; unsetEnv puts the session's own back afterwards.
func setEnv(ctx context.Context, k *kernel.Kernel, env map[string]string) error {
	vars := make(map[string]*string, len(env))
	for key, v := range env {
		vars[key] = &v
	}
	return callAgent(ctx, k, "env", map[string]any{"vars": vars})
}

// unsetEnv removes the run's env vars from the kernel, or gives back the session's value (keep) of
// those the session has.
func unsetEnv(ctx context.Context, k *kernel.Kernel, env, keep map[string]string) error {
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

// listVariables asks an idle kernel for its namespace (the variable inspector's list).
func listVariables(ctx context.Context, k *kernel.Kernel) ([]VariableInfo, error) {
	var vs []VariableInfo
	if err := persistence.CallAgent(ctx, k, "variables", map[string]any{}, &vs); err != nil {
		return nil, err
	}
	return vs, nil
}
