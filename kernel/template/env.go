package template

import "github.com/carryover/carryover/kernel"

// templateEnv is the template's own env of those variables when it imports: what every kernel of the
// server gets anyway (the session service sets this MPLBACKEND, as ipykernel itself does). A launch
// whose env has the same values is forkable.
var templateEnv = map[string]string{"MPLBACKEND": "module://matplotlib_inline.backend_inline"}

// differsAtImport says whether env sets a variable libraries read at import (kernel.ImportTimeEnv) to
// other than base, the template's own.
func differsAtImport(env, base map[string]string) bool {
	for k, v := range env {
		if w, ok := base[k]; ok && w == v {
			continue
		}
		if kernel.ImportTimeEnv(map[string]string{k: v}) {
			return true
		}
	}
	return false
}

// importEnv is the template's env of the variables read at import: Config.ImportEnv, or the server's
// kernels' (templateEnv).
func (c Config) importEnv() map[string]string {
	if c.ImportEnv != nil {
		return c.ImportEnv
	}
	return templateEnv
}
