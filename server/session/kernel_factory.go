package session

import (
	"log/slog"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/skills"
)

// kernels makes the kernels of this node's sessions, knowing nothing of any one session: the warm
// pool and the launch options (opts.Provisioner runs kernels and exec commands, sandbox.go), the
// agent installed into each new kernel, a kernel attached to a session's workspace, limits and
// skills and given its set-up, and the workspaces' disks (disk.go).
type kernels struct {
	cfg    Config
	opts   kernel.Options
	pool   *kernel.Pool
	ckpt   *persistence.Checkpointer
	skills *skills.Skills
	log    *slog.Logger
	// onLimit is told of a kernel's limit hit (the service's sandboxEvent: an event of its session).
	onLimit func(id string, k *kernel.Kernel, hit kernel.LimitHit)
}
