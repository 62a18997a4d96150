package session

// requests.go: the requests that make a session, as the front doors name them (package sessiondoc
// checks them and makes the new session's document).

import "github.com/carryover/carryover/server/session/sessiondoc"

type (
	CreateRequest  = sessiondoc.CreateRequest  // POST /api/sessions
	SandboxRequest = sessiondoc.SandboxRequest // a create request's sandbox
	NetworkRequest = sessiondoc.NetworkRequest // a create request's sandbox.network
	ContextRequest = sessiondoc.ContextRequest // PATCH /api/sessions/{id}/context
	ForkRequest    = sessiondoc.ForkRequest    // POST /api/sessions/{id}/fork
)

// MaxForkCount is the most children one fork call makes.
const MaxForkCount = sessiondoc.MaxForkCount

// newDocs is what a session this node makes takes from it (sessiondoc.Node).
func (s *Service) newDocs() sessiondoc.Node {
	return sessiondoc.Node{SandboxTimeoutSeconds: s.cfg.SandboxTimeoutSeconds, Network: s.cfg.Network,
		OwnerNode: s.cfg.ownerNode(), CheckDisk: s.kern.CheckDisk, Disks: s.kern.Disks() != nil}
}
