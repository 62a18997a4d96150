package carryover

import (
	"testing"
	"time"
)

var allStates = []string{StatePending, StateRunning, StatePaused, StateRotating, StateCompleted, StateFailed, StateCancelled}

func TestLifecycleTransitions(t *testing.T) {
	legal := map[[2]string]bool{}
	for _, m := range [][2]string{
		{StatePending, StateRunning}, {StatePending, StateCompleted}, {StatePending, StateCancelled}, {StatePending, StateFailed},
		{StateRunning, StatePaused}, {StateRunning, StateRotating}, {StateRunning, StateCompleted}, {StateRunning, StateCancelled}, {StateRunning, StateFailed},
		{StatePaused, StateRunning}, {StatePaused, StateCompleted}, {StatePaused, StateCancelled}, {StatePaused, StateFailed},
		{StateRotating, StateRunning}, {StateRotating, StateFailed}, {StateRotating, StateCancelled},
	} {
		legal[m] = true
	}
	for _, from := range allStates {
		for _, to := range allStates {
			if got := CanMove(from, to); got != legal[[2]string{from, to}] {
				t.Errorf("CanMove(%s, %s) = %v", from, to, got)
			}
		}
	}
	e := MoveError(StateCompleted, StateRunning)
	if e.Code != CodeConflict || e.Details["state"] != StateCompleted || e.Details["requested"] != StateRunning {
		t.Errorf("MoveError = %+v", e)
	}
}

func TestClosed(t *testing.T) {
	for _, st := range allStates {
		s := Session{State: st}
		want := st == StateCompleted || st == StateFailed || st == StateCancelled
		if s.Closed() != want {
			t.Errorf("Closed(%s) = %v", st, s.Closed())
		}
	}
}

func TestSetStateKeepsTheDurationClock(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s Session
	s.State = StatePending
	s.SetState(StateRunning, t0)
	if s.RunningSince == nil || !s.RunningSince.Equal(t0) {
		t.Fatalf("running_since = %v", s.RunningSince)
	}
	s.SetState(StateRotating, t0.Add(5*time.Second)) // a rotation keeps the clock running
	s.SetState(StateRunning, t0.Add(6*time.Second))
	if !s.RunningSince.Equal(t0) || s.BudgetConsumed.DurationSeconds != 0 {
		t.Fatalf("rotation stopped the clock: since %v, %gs", s.RunningSince, s.BudgetConsumed.DurationSeconds)
	}
	s.SetState(StatePaused, t0.Add(10*time.Second))
	if s.RunningSince != nil || s.BudgetConsumed.DurationSeconds != 10 {
		t.Fatalf("paused: since %v, %gs; want stopped at 10s", s.RunningSince, s.BudgetConsumed.DurationSeconds)
	}
	s.SetState(StateRunning, t0.Add(100*time.Second)) // paused time does not count
	s.SetState(StateCompleted, t0.Add(103*time.Second))
	if s.BudgetConsumed.DurationSeconds != 13 || s.State != StateCompleted {
		t.Fatalf("duration = %gs, want 13", s.BudgetConsumed.DurationSeconds)
	}
}

func TestViewHidesBookkeeping(t *testing.T) {
	since := time.Now().Add(-2 * time.Second)
	s := Session{RunningSince: &since, BudgetWarned: []string{"budget_warned_iteration_limit"}}
	v := s.View()
	if v.BudgetWarned != nil || v.BudgetConsumed.DurationSeconds < 2 {
		t.Fatalf("view: warned %v, duration %g", v.BudgetWarned, v.BudgetConsumed.DurationSeconds)
	}
	if s.BudgetWarned == nil || s.BudgetConsumed.DurationSeconds != 0 {
		t.Fatal("View changed the session")
	}
}

func TestTenantName(t *testing.T) {
	if (&Session{}).TenantName() != DefaultTenant || (&Session{Tenant: "a"}).TenantName() != "a" {
		t.Fatal("TenantName")
	}
}

func TestRecovered(t *testing.T) {
	for _, tc := range []struct{ state, sandbox, wantState, wantSandbox string }{
		{StateRotating, SandboxLive, StateRunning, SandboxHibernated},
		{StateRunning, SandboxStarting, StateRunning, SandboxHibernated},
		{StatePaused, SandboxLive, StatePaused, SandboxHibernated},
		{StatePending, SandboxNone, StatePending, SandboxNone},
		{StateCompleted, SandboxNone, StateCompleted, SandboxNone},
		{StateRunning, SandboxHibernated, StateRunning, SandboxHibernated},
	} {
		in := Session{State: tc.state, Sandbox: Sandbox{Status: tc.sandbox}}
		got := in.Recovered()
		if got.State != tc.wantState || got.Sandbox.Status != tc.wantSandbox {
			t.Errorf("%s/%s recovered as %s/%s", tc.state, tc.sandbox, got.State, got.Sandbox.Status)
		}
		if in.State != tc.state {
			t.Error("Recovered changed its receiver")
		}
	}
}
