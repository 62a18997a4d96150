package persistence

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// agentFS is the in-kernel snapshot agent, the Python package agent/carryover_agent. It is shipped
// inside the binary (not installed into the kernel's Python) so a kernel on any interpreter, sandboxed
// or not, runs exactly the agent this server speaks the spool protocol with.
//
//go:embed agent/carryover_agent/*.py agent/carryover_agent/containers/*.py
var agentFS embed.FS

const agentPackage = "carryover_agent"

// agentModule is one module of the agent package: its dotted name, its source, and whether it is a
// package (an __init__.py).
type agentModule struct {
	name, src string
	pkg       bool
}

// agentModules lists the package's modules, __init__ first, the rest sorted by name (a subpackage's
// modules under their dotted names: carryover_agent.containers.sliced).
var agentModules = loadAgentModules()

func loadAgentModules() []agentModule {
	var files []string
	for _, pat := range []string{"agent/" + agentPackage + "/*.py", "agent/" + agentPackage + "/*/*.py"} {
		f, err := fs.Glob(agentFS, pat)
		if err != nil {
			panic(err)
		}
		files = append(files, f...)
	}
	if len(files) == 0 {
		panic("persistence: agent package not embedded")
	}
	var out []agentModule
	for _, f := range files {
		b, err := agentFS.ReadFile(f)
		if err != nil {
			panic(err)
		}
		name := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(f, "agent/"), ".py"), "/", ".")
		m := agentModule{name: strings.TrimSuffix(name, ".__init__"), src: string(b), pkg: path.Base(f) == "__init__.py"}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].name == agentPackage) != (out[j].name == agentPackage) {
			return out[i].name == agentPackage
		}
		return out[i].name < out[j].name
	})
	return out
}

// AgentSource returns the agent's Python sources, each module headed by a "# module <name>" line
// (for tests and diagnostics).
func AgentSource() string {
	var b strings.Builder
	for _, m := range agentModules {
		b.WriteString("# module " + m.name + "\n" + m.src + "\n")
	}
	return b.String()
}

// AgentBootstrap returns the code that loads the agent into a kernel: run it silently once, right after
// the kernel starts. It registers the package "carryover_agent" (and its modules) in sys.modules and
// binds one hidden name, __carryover__, in the user namespace; the helper functions it defines delete
// themselves. spoolDir is the spool directory as the kernel sees it.
func AgentBootstrap(spoolDir string) string { return agentBootstrap(spoolDir, spoolDir) }

// AgentPreload returns the code a kernel template runs once while it warms (kernel/template's
// Config.Preload): it loads the agent's modules, compiled, without installing them, and marks the
// package with the sources' digest. A kernel forked from that template then installs the modules it
// inherited (agentPreloadedExpr) instead of compiling 11,000 lines again: ~55 ms of CPU per kernel.
// It also defines carryover_warm, which the template calls after its pre-imports (the agent's
// template_warm: its index of the modules' objects, made once and shared by every child), and
// carryover_child_io, which a forked kernel calls once its output streams exist (the agent's
// template_child_io: their flush that returns at once with nothing to send).
func AgentPreload() string {
	return agentLoadCode + "__carryover_pkg = __carryover_load(" + agentSources + ")\n" +
		"__carryover_pkg.__carryover_preloaded__ = " + pyString(agentDigest) + "\n" +
		"carryover_warm = __carryover_pkg.template_warm\n" +
		"carryover_child_io = __carryover_pkg.template_child_io\n"
}

// agentBootstrap carries the package's sources inside the code it returns and imports them through a
// meta-path finder serving those strings: the kernel reads no file of ours. That matters in the
// bubblewrap sandbox, where the server's files are not mounted, and for any launcher that only shares
// the ZMQ channel with the server; it also leaves nothing to clean up or for a cell to overwrite. A
// second bootstrap in the same kernel replaces the finder and the modules (the agent re-installs).
func agentBootstrap(spoolKernel, spoolHost string) string {
	return agentLoadCode + agentBootCode + "try:\n    __carryover_boot(" + agentSources +
		", " + pyString(spoolKernel) + ", " + pyString(spoolHost) + ")\nfinally:\n    del __carryover_boot, __carryover_load\n"
}

// agentBootExpr is the bootstrap as the user expression Install evaluates: exec of the code in the
// user namespace. Not a cell: ipykernel hashes every cell's text for its debugger in pure Python
// (murmur2, ~54 ms over the bootstrap's 340 KB) and IPython runs its input transformers over it,
// for nothing; an expression skips both.
func agentBootExpr(spoolKernel, spoolHost string) string {
	return "exec(" + pyString(agentBootstrap(spoolKernel, spoolHost)) + ", globals())"
}

// agentThenExpr is an expression, for after an install, that runs the batch (an agent op call's
// JSON args) and is its answer: the raw JSON as text/plain (callAgent's JSONText).
func agentThenExpr(batch string) string {
	return `(__carryover__.call("batch", ` + pyString(batch) + `) or __carryover__.take())`
}

// agentPreloadedExpr is an expression that installs the agent from the modules a template
// preloaded (AgentPreload) and is True; False when this kernel has no such modules (another digest,
// none, or already installed from them), which then needs agentBootExpr.
func agentPreloadedExpr(spoolKernel, spoolHost string) string {
	return `(lambda m: m is not None and getattr(m, "__carryover_preloaded__", None) == ` + pyString(agentDigest) +
		` and not getattr(m, "__carryover_installed__", False) and (setattr(m, "__carryover_installed__", True) or m.install(` +
		pyString(spoolKernel) + `, spool_host=` + pyString(spoolHost) + `)) is not None)(__import__("sys").modules.get("carryover_agent"))`
}

// agentSources is the first two arguments of __carryover_load: srcs ({module name: source}) and
// pkgs (the names among them that are packages), as Python literals.
var agentSources = func() string {
	var b strings.Builder
	b.WriteString("{")
	for i, m := range agentModules {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyString(m.name) + ": " + pyString(m.src))
	}
	b.WriteString("}, [")
	for _, m := range agentModules {
		if m.pkg {
			b.WriteString(pyString(m.name) + ", ")
		}
	}
	b.WriteString("]")
	return b.String()
}()

// agentDigest names the agent's sources: a template's preloaded modules are used only when they are
// these very sources.
var agentDigest = func() string {
	sum := sha256.Sum256([]byte(agentSources))
	return hex.EncodeToString(sum[:8])
}()

// agentLoadCode defines __carryover_load(srcs, pkgs), which imports the package from srcs (module
// name -> source; pkgs names the packages among them) and returns it. The modules get a filename
// "carryover_agent/<path>.py" and a loader with get_source, so tracebacks through the agent show
// its lines.
const agentLoadCode = `def __carryover_load(srcs, pkgs):
    import importlib, importlib.abc, importlib.util, sys

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        carryover_agent = True

        def find_spec(self, name, path=None, target=None):
            if name not in srcs:
                return None
            pkg = name in pkgs
            spec = importlib.util.spec_from_loader(name, self, is_package=pkg)
            spec.origin = name.replace(".", "/") + ("/__init__" if pkg else "") + ".py"
            return spec

        def create_module(self, spec):
            return None

        def exec_module(self, m):
            exec(compile(srcs[m.__name__], m.__spec__.origin, "exec"), m.__dict__)

        def get_source(self, name):
            return srcs.get(name)

    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "carryover_agent", False)]
    for k in [k for k in sys.modules if k == "carryover_agent" or k.startswith("carryover_agent.")]:
        del sys.modules[k]
    sys.meta_path.insert(0, Finder())
    return importlib.import_module("carryover_agent")
`

// agentBootCode defines __carryover_boot(srcs, pkgs, spool, host): it loads the agent's modules
// from srcs and installs them (unmarked by AgentPreload, agentPreloadedExpr never takes them).
const agentBootCode = `def __carryover_boot(srcs, pkgs, spool, host):
    __carryover_load(srcs, pkgs).install(spool, spool_host=host)
`

// pyString quotes s as a Python string literal: a JSON string is one (\uXXXX, \n, \" and \/ mean the
// same in both).
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
