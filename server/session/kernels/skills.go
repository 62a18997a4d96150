package kernels

// skills.go: a tenant's skills folder (package skills keeps this node's cache of it) mounted into a
// claimed kernel's box.

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// SkillsAttacher is a kernel process that can show a tenant's skills folder at /skills (the
// sandbox's); others have no /skills.
type SkillsAttacher interface {
	AttachSkills(hostDir string, writable bool) error
}

// attachSkills brings this node's cache of the session's tenant's skills up to date with the store
// and mounts it into a claimed kernel's box.
func (f *Factory) attachSkills(ctx context.Context, p kernel.KernelProcess, doc carryover.Session) error {
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
