package carryover

// Budget limits; zero means no limit.
type Budget struct {
	CostCapCents         float64 `json:"cost_cap_cents,omitempty"`
	IterationLimit       int     `json:"iteration_limit,omitempty"`
	DurationLimitSeconds float64 `json:"duration_limit_seconds,omitempty"`
}

// BudgetConsumed is what the session has used so far.
type BudgetConsumed struct {
	CostCents       float64 `json:"cost_cents"`
	Iterations      int     `json:"iterations"`
	DurationSeconds float64 `json:"duration_seconds"`
	CPUSeconds      float64 `json:"cpu_seconds"`      // what cost_cents is computed from
	MemoryGiBHours  float64 `json:"memory_gib_hours"` // ditto
}

// BudgetLimit is one limit of a budget with what was used of it.
type BudgetLimit struct {
	Name     string  // iteration_limit | duration_limit_seconds | cost_cap_cents
	Limit    float64 // 0: no limit
	Consumed float64
}

// Limits lists the budget's three limits beside what c used of each.
func (b Budget) Limits(c BudgetConsumed) []BudgetLimit {
	return []BudgetLimit{
		{"iteration_limit", float64(b.IterationLimit), float64(c.Iterations)},
		{"duration_limit_seconds", b.DurationLimitSeconds, c.DurationSeconds},
		{"cost_cap_cents", b.CostCapCents, c.CostCents},
	}
}

// Exceeded returns the first limit that is used up, if any.
func (b Budget) Exceeded(c BudgetConsumed) (BudgetLimit, bool) {
	for _, l := range b.Limits(c) {
		if l.Limit > 0 && l.Consumed >= l.Limit {
			return l, true
		}
	}
	return BudgetLimit{}, false
}

// Warned reports whether the budget_warning for key was sent.
func (s *Session) Warned(key string) bool {
	for _, k := range s.BudgetWarned {
		if k == key {
			return true
		}
	}
	return false
}

// MarkWarned records that the budget_warning for key was sent (once per limit).
func (s *Session) MarkWarned(key string) { s.BudgetWarned = append(s.BudgetWarned, key) }

// CostCents is the cost model behind cost_cap_cents (documented in configs/carryover.yaml).
func CostCents(c BudgetConsumed, cpuSecondCents, gibHourCents float64) float64 {
	return c.CPUSeconds*cpuSecondCents + c.MemoryGiBHours*gibHourCents
}
