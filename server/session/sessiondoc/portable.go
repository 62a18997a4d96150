package sessiondoc

// portable.go: a session's settings as an export archive carries them (its session.json,
// docs/export-format.md), and the document an import makes of them.

import (
	"encoding/json"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/archive"
)

// settings is an archive's session.json: what a create request sets, plus the agent context
// and the execution counter. Validated on import exactly as a create request.
type settings struct {
	Name           string              `json:"name"`
	Language       string              `json:"language"`
	Data           map[string]any      `json:"data"`
	Budget         *carryover.Budget   `json:"budget"`
	Rotation       *carryover.Rotation `json:"rotation"`
	Sandbox        *SandboxRequest     `json:"sandbox"`
	AgentContext   *ContextRequest     `json:"agent_context"`
	ExecutionCount int                 `json:"execution_count"`
}

// SettingsOf is the settings of session doc as an archive carries them.
func SettingsOf(doc carryover.Session) ([]byte, error) {
	sb := doc.Sandbox
	timeout := sb.TimeoutSeconds
	net := &NetworkRequest{Full: sb.Network, Allow: sb.NetworkAllow}
	wd := doc.AgentContext.WorkingDir
	return json.Marshal(map[string]any{
		"name": doc.Name, "language": doc.Language, "data": doc.Data, "budget": doc.Budget, "rotation": doc.Rotation,
		"sandbox": map[string]any{"cpus": sb.CPUs, "memory": sb.Memory, "disk": sb.Disk, "timeout_seconds": timeout,
			"network": networkJSON(net), "skills": sb.Skills},
		"agent_context":   map[string]any{"working_dir": wd, "env_vars": doc.AgentContext.EnvVars, "custom_state": doc.AgentContext.CustomState},
		"execution_count": doc.ExecutionCount,
	})
}

// networkJSON is a sandbox network setting as a create request writes it: a boolean, or {"allow"}.
func networkJSON(n *NetworkRequest) any {
	if n.Allow != nil {
		return map[string]any{"allow": n.Allow}
	}
	return n.Full
}

// FromSettings is the new session's document from an archive's settings (raw), checked as a create
// request's are. A setting this node cannot honour is dropped and named in the warnings, never
// silently.
func FromSettings(raw []byte, id, tenant string, n Node) (carryover.Session, []string, error) {
	var ps settings
	if err := json.Unmarshal(raw, &ps); err != nil {
		return carryover.Session{}, nil, carryover.Errorf(carryover.CodeInvalid, "archive refused: session settings: %v", err).
			WithDetails("reason", archive.ReasonCorrupt, "member", archive.SessionName)
	}
	warnings := []string{}
	if ps.Sandbox != nil && ps.Sandbox.Disk != "" && !n.Disks {
		warnings = append(warnings, fmt.Sprintf("sandbox.disk %s not applied: this server gives workspaces no disk of their own", ps.Sandbox.Disk))
		ps.Sandbox.Disk = ""
	}
	if ps.Language == "" {
		ps.Language = "python"
	}
	cr := CreateRequest{SessionID: id, Name: ps.Name, Language: ps.Language, Budget: ps.Budget}
	if err := cr.Validate(id); err != nil {
		return carryover.Session{}, nil, err
	}
	doc := n.blank(id, ps.Name, ps.Language, tenant)
	doc.ExecutionCount = max(ps.ExecutionCount, 0)
	if ps.Data != nil {
		doc.Data = ps.Data
	}
	if ps.Budget != nil {
		doc.Budget = *ps.Budget
	}
	if ps.Rotation != nil {
		doc.Rotation = *ps.Rotation
	}
	if err := ApplySandbox(&doc.Sandbox, ps.Sandbox, n.CheckDisk); err != nil {
		return carryover.Session{}, nil, err
	}
	if err := CheckRotation(doc); err != nil {
		return carryover.Session{}, nil, err
	}
	if err := applyContext(&doc.AgentContext, ps.AgentContext); err != nil {
		return carryover.Session{}, nil, err
	}
	return doc, warnings, nil
}

// applyContext applies an archive's agent context, checked as PATCH .../context checks one.
func applyContext(ac *carryover.AgentContext, req *ContextRequest) error {
	if req == nil {
		return nil
	}
	if req.WorkingDir != nil {
		rel, err := carryover.WorkspacePath(*req.WorkingDir)
		if err != nil {
			return err
		}
		if rel != "" {
			ac.WorkingDir = "/workspace/" + rel
		}
	}
	if err := carryover.ValidateEnv(req.EnvVars, "agent_context.env_vars"); err != nil {
		return err
	}
	if req.EnvVars != nil {
		ac.EnvVars = req.EnvVars
	}
	if req.CustomState != nil {
		ac.CustomState = req.CustomState
	}
	return nil
}
