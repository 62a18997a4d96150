package carryover

import "testing"

func TestBudgetExceeded(t *testing.T) {
	b := Budget{IterationLimit: 3, DurationLimitSeconds: 60, CostCapCents: 10}
	for _, tc := range []struct {
		used BudgetConsumed
		want string // "" when within budget
	}{
		{BudgetConsumed{}, ""},
		{BudgetConsumed{Iterations: 2, DurationSeconds: 59.9, CostCents: 9.99}, ""},
		{BudgetConsumed{Iterations: 3}, "iteration_limit"},
		{BudgetConsumed{DurationSeconds: 60}, "duration_limit_seconds"},
		{BudgetConsumed{CostCents: 11}, "cost_cap_cents"},
		{BudgetConsumed{Iterations: 9, CostCents: 99}, "iteration_limit"}, // the first one used up
	} {
		l, over := b.Exceeded(tc.used)
		if over != (tc.want != "") || l.Name != tc.want {
			t.Errorf("Exceeded(%+v) = %+v, %v; want %q", tc.used, l, over, tc.want)
		}
	}
	if _, over := (Budget{}).Exceeded(BudgetConsumed{Iterations: 1e6, CostCents: 1e9}); over {
		t.Error("a budget without limits was exceeded")
	}
}

func TestBudgetLimits(t *testing.T) {
	ls := Budget{IterationLimit: 3, CostCapCents: 10}.Limits(BudgetConsumed{Iterations: 1, DurationSeconds: 5, CostCents: 2})
	want := []BudgetLimit{{"iteration_limit", 3, 1}, {"duration_limit_seconds", 0, 5}, {"cost_cap_cents", 10, 2}}
	if len(ls) != len(want) {
		t.Fatalf("Limits = %+v", ls)
	}
	for i := range want {
		if ls[i] != want[i] {
			t.Errorf("Limits[%d] = %+v, want %+v", i, ls[i], want[i])
		}
	}
}

func TestWarned(t *testing.T) {
	var s Session
	if s.Warned("k") {
		t.Fatal("warned before marked")
	}
	s.MarkWarned("k")
	if !s.Warned("k") || s.Warned("j") {
		t.Fatal("Warned after MarkWarned")
	}
}

func TestCostCents(t *testing.T) {
	c := BudgetConsumed{CPUSeconds: 30, MemoryGiBHours: 0.5}
	if got := CostCents(c, 0.01, 2); got != 30*0.01+0.5*2 {
		t.Fatalf("CostCents = %g", got)
	}
}
