package template

import "strings"

// importTimeEnv are prefixes of env vars that libraries read once, when they are imported: BLAS and
// OpenMP thread counts (numpy, scipy, torch), numexpr's, numpy's own, matplotlib's backend and config
// dir, pandas'. A template imported persistence.pre_import before any session's env reached it.
var importTimeEnv = []string{"OMP_", "OPENBLAS_", "GOTO_", "MKL_", "VECLIB_", "BLIS_", "NUMEXPR_", "NPY_", "MPL", "PANDAS_"}

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
