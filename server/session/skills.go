package session

// skills.go: the service's side of a tenant's skills (package skills keeps them and serves the
// API's calls; package kernels mounts a tenant's folder into a claimed kernel's box).

import (
	"github.com/carryover/carryover/server/session/skills"
)

// Skills is the tenants' skills as the API serves them (package skills), each call for the tenant
// of its context.
func (s *Service) Skills() skills.API { return skills.API{Skills: s.skills} }
