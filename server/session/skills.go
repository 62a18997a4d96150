package session

// skills.go: the service's side of a tenant's skills (package skills keeps them and serves the
// API's calls): mounting a tenant's folder into a claimed kernel's box.

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/skills"
)

// Skills is the tenants' skills as the API serves them (package skills), each call for the tenant
// of its context.
func (s *Service) Skills() skills.API { return skills.API{Skills: s.skills} }

// SkillsAttacher is a kernel process that can show a tenant's skills folder at /skills (the
// sandbox's); others have no /skills.
type SkillsAttacher interface {
	AttachSkills(hostDir string, writable bool) error
}

// attachSkills brings this node's cache of the session's tenant's skills up to date with the store
// and mounts it into a claimed kernel's box.
func (f *kernels) attachSkills(ctx context.Context, p kernel.KernelProcess, doc carryover.Session) error {
	sa, ok := p.(SkillsAttacher)
	if !ok {
		return nil
	}
	d, err := f.skills.Dir(ctx, doc.TenantName())
	if err != nil {
		return err
	}
	return sa.AttachSkills(d, doc.Sandbox.Skills == carryover.SkillsReadWrite)
}
