package sessiondoc

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/carryover/carryover"
)

// Node is what a new session takes from the node that makes it.
type Node struct {
	SandboxTimeoutSeconds float64 // sandbox.timeout_seconds: a new session's rotation timeout
	Network               bool    // sandbox.network: a new session's network setting
	OwnerNode             *string // the node that makes a session owns it (nil on a single node)
	// CheckDisk checks a sandbox.disk size against what this node can give (kernels.Factory.CheckDisk).
	CheckDisk func(string) error
	// Disks says whether this node gives workspaces a disk of their own.
	Disks bool
}

// blank is a new pending session of tenant with no kernel, an empty context at /workspace and the
// node's sandbox defaults.
func (n Node) blank(id, name, language, tenant string) carryover.Session {
	now := time.Now().UTC()
	return carryover.Session{
		ID: id, Name: name, Language: language, State: carryover.StatePending,
		Sandbox:      carryover.Sandbox{Status: carryover.SandboxNone, TimeoutSeconds: n.SandboxTimeoutSeconds, Network: n.Network},
		Data:         map[string]any{},
		AgentContext: carryover.AgentContext{WorkingDir: "/workspace", EnvVars: map[string]string{}, CustomState: map[string]any{}},
		Tenant:       tenant,
		OwnerNode:    n.OwnerNode,
		CreatedAt:    now, UpdatedAt: now, LastActivity: now,
	}
}

// FromCreate is the document of a session a create request makes under id for tenant, or the
// request's invalid error.
func FromCreate(req CreateRequest, id, tenant string, n Node) (carryover.Session, error) {
	if err := req.Validate(id); err != nil {
		return carryover.Session{}, err
	}
	doc := n.blank(id, req.Name, "python", tenant)
	doc.ClientID = req.ClientID
	if req.Data != nil {
		doc.Data = req.Data
	}
	if req.Budget != nil {
		doc.Budget = *req.Budget
	}
	if err := ApplySandbox(&doc.Sandbox, req.Sandbox, n.CheckDisk); err != nil {
		return carryover.Session{}, err
	}
	if req.Rotation != nil {
		doc.Rotation = *req.Rotation
	}
	if err := CheckRotation(doc); err != nil {
		return carryover.Session{}, err
	}
	return doc, nil
}

// Fork is the fork's document: the source's name, data, budget limits, sandbox and rotation
// settings and agent context (copied, not shared); a fresh budget consumption, no client id (so
// reattach never hands an agent the fork instead of its own session), pending.
func Fork(from carryover.Session, newID string, now time.Time) carryover.Session {
	doc := carryover.Session{
		ID: newID, Name: from.Name, Language: from.Language, State: carryover.StatePending,
		Sandbox: carryover.Sandbox{Status: carryover.SandboxNone, CPUs: from.Sandbox.CPUs, Memory: from.Sandbox.Memory, Disk: from.Sandbox.Disk,
			TimeoutSeconds: from.Sandbox.TimeoutSeconds, Network: from.Sandbox.Network,
			NetworkAllow: slices.Clone(from.Sandbox.NetworkAllow), Skills: from.Sandbox.Skills},
		Data: cloneJSON(from.Data),
		AgentContext: carryover.AgentContext{WorkingDir: from.AgentContext.WorkingDir,
			EnvVars: maps.Clone(from.AgentContext.EnvVars), CustomState: cloneJSON(from.AgentContext.CustomState)},
		Budget:    from.Budget,
		Rotation:  from.Rotation,
		Tenant:    from.TenantName(),
		CreatedAt: now, UpdatedAt: now, LastActivity: now,
	}
	if doc.Data == nil {
		doc.Data = map[string]any{}
	}
	if doc.AgentContext.EnvVars == nil {
		doc.AgentContext.EnvVars = map[string]string{}
	}
	if doc.AgentContext.CustomState == nil {
		doc.AgentContext.CustomState = map[string]any{}
	}
	return doc
}

// Relocate is the working-dir mapping of a checkpoint copied from the workspace srcWS to dstWS: a
// kernel that is not sandboxed saw its workspace by its host path, so the new session's kernel
// must start in its own workspace, not the source's (sandboxed kernels see /workspace either way,
// and an archive from one of them names no host path).
func Relocate(srcWS, dstWS string) func(string) string {
	return func(c string) string {
		if srcWS != "" && srcWS != "/workspace" && (c == srcWS || strings.HasPrefix(c, srcWS+string(filepath.Separator))) {
			return dstWS + c[len(srcWS):]
		}
		return c
	}
}

// cloneJSON deep-copies a JSON-shaped map.
func cloneJSON(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return maps.Clone(m)
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return maps.Clone(m)
	}
	return out
}
