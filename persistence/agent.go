package persistence

import (
	_ "embed"
	"encoding/json"
	"strings"
)

// agentSource is the in-kernel snapshot agent. It is shipped inside the binary (not installed into the
// kernel's Python) so a kernel on any interpreter, sandboxed or not, runs exactly the agent this server
// speaks the spool protocol with.
//
//go:embed agent/carryover_agent.py
var agentSource string

// AgentSource returns the agent's Python source (for tests and diagnostics).
func AgentSource() string { return agentSource }

// AgentBootstrap returns the code that loads the agent into a kernel: run it silently once, right after
// the kernel starts. It registers the module "carryover_agent" in sys.modules and binds one hidden name,
// __carryover__, in the user namespace; the helper function it defines deletes itself. spoolDir is the
// spool directory as the kernel sees it.
func AgentBootstrap(spoolDir string) string { return agentBootstrap(spoolDir, spoolDir) }

func agentBootstrap(spoolKernel, spoolHost string) string {
	var b strings.Builder
	b.WriteString("def __carryover_boot(src, spool, host):\n")
	b.WriteString("    import sys, types\n")
	b.WriteString("    m = types.ModuleType('carryover_agent')\n")
	b.WriteString("    m.__file__ = 'carryover_agent.py'\n")
	b.WriteString("    sys.modules['carryover_agent'] = m\n")
	b.WriteString("    exec(compile(src, 'carryover_agent.py', 'exec'), m.__dict__)\n")
	b.WriteString("    m.install(spool, spool_host=host)\n")
	b.WriteString("try:\n    __carryover_boot(")
	b.WriteString(pyString(agentSource))
	b.WriteString(", ")
	b.WriteString(pyString(spoolKernel))
	b.WriteString(", ")
	b.WriteString(pyString(spoolHost))
	b.WriteString(")\nfinally:\n    del __carryover_boot\n")
	return b.String()
}

// pyString quotes s as a Python string literal: a JSON string is one (\uXXXX, \n, \" and \/ mean the
// same in both).
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
