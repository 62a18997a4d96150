package template

import "strings"

// importTimeEnv are prefixes of env vars that libraries read once, when they are imported: BLAS and
// OpenMP thread counts (numpy, scipy, torch), numexpr's, numpy's own, matplotlib's backend and config
// dir, pandas'. A template imported persistence.pre_import before any session's env reached it.
var importTimeEnv = []string{"OMP_", "OPENBLAS_", "GOTO_", "MKL_", "VECLIB_", "BLIS_", "NUMEXPR_", "NPY_", "MPL", "PANDAS_"}

// templateEnv is the template's own env of importTimeEnv when it imports: what every kernel of the
// server gets anyway (the session service sets this MPLBACKEND, as ipykernel itself does). A launch
// whose env has the same values is forkable.
var templateEnv = map[string]string{"MPLBACKEND": "module://matplotlib_inline.backend_inline"}

// differsAtImport says whether env sets a variable of importTimeEnv to other than the template's.
func differsAtImport(env map[string]string) bool {
	for k, v := range env {
		if w, ok := templateEnv[k]; ok && w == v {
			continue
		}
		if ImportTimeEnv(map[string]string{k: v}) {
			return true
		}
	}
	return false
}

// ImportTimeEnv says whether env sets a variable of importTimeEnv: such a kernel is started cold,
// so the variable is in place before any library is imported, as it would be without templates
// (and the warm pool: server/session asks the same).
func ImportTimeEnv(env map[string]string) bool {
	for k := range env {
		for _, p := range importTimeEnv {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
	}
	return false
}
