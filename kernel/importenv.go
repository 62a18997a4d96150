package kernel

import "strings"

// importTimeEnv are prefixes of env vars that libraries read once, when they are imported: BLAS and
// OpenMP thread counts (numpy, scipy, torch), numexpr's, numpy's own, matplotlib's backend and config
// dir, pandas'. A kernel that imported such libraries before a session's env reached it (a warm pool
// kernel that pre-imported them, a kernel forked from kernel/template's template) did so without it.
var importTimeEnv = []string{"OMP_", "OPENBLAS_", "GOTO_", "MKL_", "VECLIB_", "BLIS_", "NUMEXPR_", "NPY_", "MPL", "PANDAS_"}

// ImportTimeEnv says whether env sets a variable of importTimeEnv: such a kernel must be started
// from scratch, so the variable is in place before any library is imported.
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
