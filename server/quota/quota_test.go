package quota

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// usage is a Usage of a fixed list of sessions, each checkpoint listing counted.
type usage struct {
	mu       sync.Mutex
	sessions []carryover.Session
	bytes    map[string]int64
	listings int
}

func (u *usage) Sessions(context.Context) ([]carryover.Session, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]carryover.Session(nil), u.sessions...), nil
}

func (u *usage) CheckpointBytes(_ context.Context, id string) (int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.listings++
	return u.bytes[id], nil
}

func (u *usage) add(d carryover.Session) {
	u.mu.Lock()
	u.sessions = append(u.sessions, d)
	u.mu.Unlock()
}

func wantQuota(t *testing.T, err error, quota string) {
	t.Helper()
	if e := carryover.ErrorOf(err); err == nil || e.Code != carryover.CodeQuotaExceeded || e.Details["quota"] != quota {
		t.Fatalf("err = %v, want quota_exceeded on %s", err, quota)
	}
}

// TestCreatesPassInTurn: 12 creates at once of a tenant whose quota is 5 sessions, each storing its
// session before it releases: exactly 5 pass; another tenant is not limited.
func TestCreatesPassInTurn(t *testing.T) {
	t.Parallel()
	u := &usage{}
	g := New(func(tenant string) carryover.Quotas {
		if tenant == "small" {
			return carryover.Quotas{Sessions: 5}
		}
		return carryover.Quotas{}
	}, u)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 12 {
		wg.Go(func() {
			release, err := g.AdmitCreate(context.Background(), "small")
			if err != nil {
				wantQuota(t, err, carryover.QuotaSessions)
				return
			}
			u.add(carryover.Session{Tenant: "small"})
			mu.Lock()
			passed++
			mu.Unlock()
			release()
		})
	}
	wg.Wait()
	if passed != 5 {
		t.Fatalf("%d creates passed, want 5", passed)
	}
	if _, err := g.AdmitCreate(context.Background(), "other"); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
}

// TestStoredBytesCountedOncePerCheckpoint: stored_bytes sums the tenant's sessions' checkpoint
// bytes, listing a session's checkpoints again only when its last checkpoint changed.
func TestStoredBytesCountedOncePerCheckpoint(t *testing.T) {
	t.Parallel()
	u := &usage{bytes: map[string]int64{"a": 600, "b": 300, "c": 1 << 30}}
	ref := func(id string) *carryover.CheckpointRef { return &carryover.CheckpointRef{ID: id} }
	u.sessions = []carryover.Session{{ID: "a", Tenant: "t", LastCheckpoint: ref("1")}, {ID: "b", Tenant: "t", LastCheckpoint: ref("2")},
		{ID: "c", Tenant: "other", LastCheckpoint: ref("3")}, {ID: "d", Tenant: "t"}}
	g := New(func(string) carryover.Quotas { return carryover.Quotas{StoredBytes: 1000} }, u)
	if err := g.CheckTurn(context.Background(), "t"); err != nil {
		t.Fatalf("900 of 1000 bytes: %v", err)
	}
	if err := g.CheckTurn(context.Background(), "t"); err != nil || u.listings != 2 {
		t.Fatalf("again: %v, %d listings, want 2 (each session once)", err, u.listings)
	}
	u.mu.Lock()
	u.bytes["b"] = 400
	u.sessions[1].LastCheckpoint = ref("2b")
	u.mu.Unlock()
	wantQuota(t, g.CheckTurn(context.Background(), "t"), carryover.QuotaStoredBytes)
	if u.listings != 3 {
		t.Fatalf("%d listings, want 3: only b's checkpoint changed", u.listings)
	}
}

// TestQuotaCPUWindow: CPU counts from the start of the period (a session made before it from its
// CPU then, one made in it from zero) and starts again at the next period.
func TestQuotaCPUWindow(t *testing.T) {
	t.Parallel()
	g := New(nil, &usage{})
	start := time.Unix(7200, 0)
	created := map[string]time.Time{"old": start.Add(-time.Minute), "new": start.Add(time.Second)}
	used := g.cpuUsedLocked("t", time.Hour, start.Add(10*time.Second), map[string]float64{"old": 100, "new": 2}, created)
	if used != 2 {
		t.Fatalf("first look: %g, want 2 (the old session's 100 s are from before the period)", used)
	}
	used = g.cpuUsedLocked("t", time.Hour, start.Add(20*time.Second), map[string]float64{"old": 103, "new": 4}, created)
	if used != 7 {
		t.Fatalf("later: %g, want 3 + 4", used)
	}
	used = g.cpuUsedLocked("t", time.Hour, start.Add(time.Hour+time.Second), map[string]float64{"old": 104, "new": 5}, created)
	if used != 0 {
		t.Fatalf("next period: %g, want 0", used)
	}
	if used := g.cpuUsedLocked("u", time.Hour, start.Add(time.Hour+time.Second), map[string]float64{"x": 9}, map[string]time.Time{"x": start}); used != 0 {
		t.Fatalf("another tenant shares the window: %g", used)
	}
}
