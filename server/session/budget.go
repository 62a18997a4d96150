package session

import (
	"github.com/carryover/carryover"

	"context"
)

// checkBudget refuses a run or exec when any limit is reached (402 budget_exceeded). Caller holds ls.lock.
func (s *Service) checkBudget(ctx context.Context, ls *liveSession) error {
	doc := ls.snapshot().View()
	b, c := doc.Budget, doc.BudgetConsumed
	var which string
	var limit, used float64
	switch {
	case b.IterationLimit > 0 && c.Iterations >= b.IterationLimit:
		which, limit, used = "iteration_limit", float64(b.IterationLimit), float64(c.Iterations)
	case b.DurationLimitSeconds > 0 && c.DurationSeconds >= b.DurationLimitSeconds:
		which, limit, used = "duration_limit_seconds", b.DurationLimitSeconds, c.DurationSeconds
	case b.CostCapCents > 0 && c.CostCents >= b.CostCapCents:
		which, limit, used = "cost_cap_cents", b.CostCapCents, c.CostCents
	default:
		return nil
	}
	s.emit(ctx, ls, "budget_exceeded", map[string]any{"limit": which, "value": limit, "consumed": used})
	return carryover.Errorf(carryover.CodeBudgetExceeded, "budget exceeded: %s is %g and %g is used", which, limit, used).
		WithDetails("limit", which, "value", limit, "consumed", used)
}

// afterTurn updates the consumed budget and emits one budget_warning per limit at 80%.
func (s *Service) afterTurn(ctx context.Context, ls *liveSession) {
	var warn []map[string]any
	s.update(ctx, ls, func(d *carryover.Session) error {
		b, c := d.Budget, d.View().BudgetConsumed
		check := func(name string, limit, used float64) {
			if limit <= 0 || used < 0.8*limit {
				return
			}
			key := "budget_warned_" + name
			if d.Warned(key) {
				return
			}
			d.MarkWarned(key)
			warn = append(warn, map[string]any{"limit": name, "value": limit, "consumed": used})
		}
		check("iteration_limit", float64(b.IterationLimit), float64(c.Iterations))
		check("duration_limit_seconds", b.DurationLimitSeconds, c.DurationSeconds)
		check("cost_cap_cents", b.CostCapCents, c.CostCents)
		if len(warn) == 0 {
			return errUnchanged // most turns: no write
		}
		return nil
	})
	for _, w := range warn {
		s.emit(ctx, ls, "budget_warning", w)
	}
}
