package carryover

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Summary is r as one line for a person or an agent reading text (the CLI's run, the MCP run_python
// tool): "restored from checkpoint <id> (turn N)", then what replay recomputed, what is not
// restored and why, what failed to load and the workspace files kept that differ, each when there
// are any. The JSON answer always held them; a terminal or a model reading text saw nothing, so a
// variable lost to a crash or a wake went unmentioned until a NameError.
func (r *RestoreReport) Summary() string {
	if r == nil {
		return ""
	}
	line := fmt.Sprintf("restored from checkpoint %s (turn %d)", r.CheckpointID, r.Turn)
	recomputed := map[string]bool{}
	if len(r.Recomputed) > 0 {
		parts := make([]string, len(r.Recomputed))
		for i, rc := range r.Recomputed {
			recomputed[rc.Name] = true
			parts[i] = fmt.Sprintf("%s (replayed %s)", rc.Name, turnList(rc.Turns))
		}
		line += "; recomputed [" + strings.Join(parts, ", ") + "]"
	}
	if lost := r.lost(recomputed); len(lost) > 0 {
		line += "; not restored [" + skipList(lost) + "]"
	}
	if len(r.Failed) > 0 {
		line += "; failed to load [" + skipList(r.Failed) + "]"
	}
	if len(r.FilesAhead) > 0 {
		files := make([]string, len(r.FilesAhead))
		for i, f := range r.FilesAhead {
			files[i] = quoteControl(f)
		}
		line += "; workspace files kept that differ from it [" + strings.Join(files, ", ") + "]"
	}
	return line
}

// lost are the skipped variables replay did not recompute, each with replay's reason when it
// tried (it says more than the pickle's) and its type.
func (r *RestoreReport) lost(recomputed map[string]bool) []VarSkip {
	why := map[string]VarSkip{}
	for _, s := range r.Skipped {
		why[s.Name] = s
	}
	for _, s := range r.NotReplayed {
		if s.Type == "" {
			s.Type = why[s.Name].Type
		}
		why[s.Name] = s
	}
	var out []VarSkip
	for _, s := range r.Skipped {
		if !recomputed[s.Name] {
			out = append(out, why[s.Name])
		}
	}
	return out
}

// skipList is "name (type: reason), ...".
func skipList(list []VarSkip) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = fmt.Sprintf("%s (%s: %s)", s.Name, s.Type, s.Reason)
	}
	return strings.Join(parts, ", ")
}

// turnList is turns as "turn 2", "turns 1-3" when consecutive, else "turns 1, 4, 6".
func turnList(turns []int) string {
	switch {
	case len(turns) == 1:
		return fmt.Sprintf("turn %d", turns[0])
	case len(turns) > 1 && consecutive(turns):
		return fmt.Sprintf("turns %d-%d", turns[0], turns[len(turns)-1])
	}
	parts := make([]string, len(turns))
	for i, t := range turns {
		parts[i] = strconv.Itoa(t)
	}
	return "turns " + strings.Join(parts, ", ")
}

// consecutive says whether turns go up one at a time.
func consecutive(turns []int) bool {
	for i := 1; i < len(turns); i++ {
		if turns[i] != turns[i-1]+1 {
			return false
		}
	}
	return true
}

// quoteControl is s quoted, Go-style, when it holds a control character (a file named with a
// newline would break the line), else s.
func quoteControl(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
