// Package sessiondoc makes a new session's document, with the checks each way of making one passes:
// from a create request (FromCreate), from a fork's source (Fork), from an export archive's settings
// (FromSettings), and the settings an export writes (SettingsOf). It holds no session and imports
// nothing of the session service (server/session), which registers and stores what it makes.
package sessiondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// CreateRequest is the body of POST /api/sessions; every field is optional.
type CreateRequest struct {
	SessionID string              `json:"session_id"`
	Name      string              `json:"name"`
	Language  string              `json:"language"`
	Data      map[string]any      `json:"data"`
	Budget    *carryover.Budget   `json:"budget"`
	Sandbox   *SandboxRequest     `json:"sandbox"`
	Rotation  *carryover.Rotation `json:"rotation"`
	ClientID  string              `json:"client_id"`
	Start     bool                `json:"start"`
}

// SandboxRequest is the sandbox part of a create request; every field is optional.
type SandboxRequest struct {
	CPUs           string          `json:"cpus"`
	Memory         string          `json:"memory"`
	Disk           string          `json:"disk"` // the workspace disk's size (package kernels: disk_size.go)
	TimeoutSeconds *float64        `json:"timeout_seconds"`
	Network        *NetworkRequest `json:"network"`
	Skills         string          `json:"skills"` // "ro" (the default) or "rw"
}

// ContextRequest is the body of PATCH /api/sessions/{id}/context: given keys replace.
type ContextRequest struct {
	WorkingDir  *string           `json:"working_dir"`
	EnvVars     map[string]string `json:"env_vars"`
	CustomState map[string]any    `json:"custom_state"`
}

// Validate checks what a create request names beside its sandbox: the id it will have, the
// language, the budget.
func (req CreateRequest) Validate(id string) error {
	if err := carryover.ValidateSessionID(id); err != nil {
		return err
	}
	if err := carryover.ValidateLanguage(req.Language); err != nil {
		return err
	}
	if req.Budget != nil {
		return req.Budget.Validate()
	}
	return nil
}

// NetworkRequest is a create request's sandbox.network: true or false, or {"allow": ["host",
// "*.domain", "host:port", ...]} for an egress allowlist (kernel/sandbox/egress.go).
type NetworkRequest struct {
	Full  bool     // true: the host's network
	Allow []string // not nil: only these destinations, through the server's proxy
}

// UnmarshalJSON accepts a boolean or an object with exactly an "allow" list of strings.
func (n *NetworkRequest) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &n.Full); err == nil {
		return nil
	}
	var o struct {
		Allow *[]string `json:"allow"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&o); err != nil || o.Allow == nil {
		return errors.New(`sandbox.network must be true, false or {"allow": ["host", "*.domain", "host:port"]}`)
	}
	n.Allow = *o.Allow
	if n.Allow == nil {
		n.Allow = []string{}
	}
	return nil
}

// ApplySandbox validates the sandbox settings of a create request and applies them to sb;
// checkDisk checks its disk size (kernels.Factory.CheckDisk: what this server can give).
func ApplySandbox(sb *carryover.Sandbox, req *SandboxRequest, checkDisk func(string) error) error {
	if req == nil {
		return nil
	}
	if req.CPUs != "" {
		if _, err := kernel.ParseCPUs(req.CPUs); err != nil {
			return carryover.Errorf(carryover.CodeInvalid, "sandbox.cpus: %v", err).WithDetails("field", "sandbox.cpus")
		}
	}
	if req.Memory != "" {
		if _, err := kernel.ParseMemory(req.Memory); err != nil {
			return carryover.Errorf(carryover.CodeInvalid, "sandbox.memory: %v", err).WithDetails("field", "sandbox.memory")
		}
	}
	sb.CPUs, sb.Memory = req.CPUs, req.Memory
	if req.TimeoutSeconds != nil {
		if *req.TimeoutSeconds < 0 {
			return carryover.Errorf(carryover.CodeInvalid, "sandbox.timeout_seconds must not be negative").WithDetails("field", "sandbox.timeout_seconds")
		}
		sb.TimeoutSeconds = *req.TimeoutSeconds
	}
	switch req.Skills {
	case "", carryover.SkillsReadOnly:
	case carryover.SkillsReadWrite:
		sb.Skills = carryover.SkillsReadWrite
	default:
		return carryover.Errorf(carryover.CodeInvalid, `sandbox.skills must be "ro" or "rw"`).WithDetails("field", "sandbox.skills")
	}
	if req.Network != nil {
		sb.Network, sb.NetworkAllow = req.Network.Full, nil
		if req.Network.Allow != nil {
			if _, err := kernel.ParseAllowlist(req.Network.Allow); err != nil {
				return carryover.Errorf(carryover.CodeInvalid, "sandbox.%v", err).WithDetails("field", "sandbox.network.allow")
			}
			sb.NetworkAllow = slices.Clone(req.Network.Allow)
		}
	}
	if err := checkDisk(req.Disk); err != nil {
		return err
	}
	sb.Disk = req.Disk
	return nil
}
