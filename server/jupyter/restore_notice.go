package jupyter

import (
	"strconv"
	"strings"

	"github.com/carryover/carryover"
)

// restoreNotice says in words what a restore could not bring back as it was: a client of
// carryover's API reads it in the run's restore report (files_ahead, failed, not_replayed), but a
// Jupyter execute_reply has no field for it, and a workspace file left ahead of the checkpoint by a
// cell whose kernel died would otherwise be kept without a word. "" when the report names nothing;
// else prefix and the notice.
func restoreNotice(r *carryover.RestoreReport, prefix string) string {
	if r == nil {
		return ""
	}
	var parts []string
	if len(r.FilesAhead) > 0 {
		parts = append(parts, "workspace files that differ from the checkpoint, kept as they are: "+strings.Join(r.FilesAhead, ", "))
	}
	if names := varNames(r.Failed); names != "" {
		parts = append(parts, "variables that failed to load: "+names)
	}
	if names := varNames(r.NotReplayed); names != "" {
		parts = append(parts, "variables not brought back: "+names)
	}
	if len(parts) == 0 {
		return ""
	}
	return prefix + "the session was restored from its checkpoint of turn " + strconv.Itoa(r.Turn) + "; " + strings.Join(parts, "; ")
}

func varNames(vs []carryover.VarSkip) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
}
