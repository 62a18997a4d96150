package session

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
)

// checkBudget refuses a run or exec when any limit is reached (402 budget_exceeded). Caller holds ls.lock.
func (ls *Session) checkBudget(ctx context.Context) error {
	doc := ls.docCopy().View()
	l, over := doc.Budget.Exceeded(doc.BudgetConsumed)
	if !over {
		return nil
	}
	ls.emit(ctx, carryover.EventBudgetExceeded, map[string]any{"limit": l.Name, "value": l.Limit, "consumed": l.Consumed})
	return carryover.Errorf(carryover.CodeBudgetExceeded, "budget exceeded: %s is %g and %g is used", l.Name, l.Limit, l.Consumed).
		WithDetails("limit", l.Name, "value", l.Limit, "consumed", l.Consumed)
}

// afterTurn emits one budget_warning per limit at 80% of it.
func (ls *Session) afterTurn(ctx context.Context) error {
	var warn []carryover.BudgetLimit
	_, err := ls.update(ctx, func(d *carryover.Session) error {
		for _, l := range d.Budget.Limits(d.View().BudgetConsumed) {
			key := "budget_warned_" + l.Name
			if l.Limit <= 0 || l.Consumed < 0.8*l.Limit || d.Warned(key) {
				continue
			}
			d.MarkWarned(key)
			warn = append(warn, l)
		}
		if len(warn) == 0 {
			return errUnchanged // most turns: no write
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording budget warnings: %w", err)
	}
	for _, l := range warn {
		ls.emit(ctx, carryover.EventBudgetWarning, map[string]any{"limit": l.Name, "value": l.Limit, "consumed": l.Consumed})
	}
	return nil
}
