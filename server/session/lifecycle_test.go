package session

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/mock"
)

func TestCreateDefaults(t *testing.T) {
	s, store, _ := testService(t, func(c *Config) { c.SandboxTimeoutSeconds = 900; c.Network = true })
	ctx := carryover.NewContextWithTenant(context.Background(), "acme")
	doc, err := s.Create(ctx, CreateRequest{Name: "n", ClientID: "c1", Data: map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.ID) != len("sess_")+16 || doc.ID[:5] != "sess_" {
		t.Errorf("id = %q, want sess_ and 16 hex digits", doc.ID)
	}
	if doc.State != carryover.StatePending || doc.Language != "python" || doc.Sandbox.Status != carryover.SandboxNone {
		t.Errorf("state %q language %q sandbox %q", doc.State, doc.Language, doc.Sandbox.Status)
	}
	if doc.Sandbox.TimeoutSeconds != 900 || !doc.Sandbox.Network {
		t.Errorf("sandbox = %+v, want the server's timeout and network", doc.Sandbox)
	}
	if doc.Tenant != "acme" || doc.OwnerNode != nil || doc.AgentContext.WorkingDir != "/workspace" {
		t.Errorf("tenant %q owner %v wd %q", doc.Tenant, doc.OwnerNode, doc.AgentContext.WorkingDir)
	}
	rec, err := store.GetSession(ctx, doc.ID)
	if err != nil || rec.ClientID != "c1" || rec.State != carryover.StatePending {
		t.Errorf("stored record %+v, %v", rec, err)
	}
	if st, err := os.Stat(s.cfg.workspace(doc.ID)); err != nil || !st.IsDir() {
		t.Errorf("workspace not made: %v", err)
	}
	if got, err := s.Get(doc.ID); err != nil || got.Data["k"] != "v" {
		t.Errorf("Get = %+v, %v", got, err)
	}
}

func TestCreateOwnerNodeInCluster(t *testing.T) {
	s, _, _ := testService(t, func(c *Config) { c.NodeID = "node-a" })
	doc := mustCreate(t, s, CreateRequest{SessionID: "x"})
	if doc.OwnerNode == nil || *doc.OwnerNode != "node-a" {
		t.Fatalf("owner_node = %v, want node-a", doc.OwnerNode)
	}
}

func TestCreateRefusals(t *testing.T) {
	neg := -1.0
	for _, tc := range []struct {
		name  string
		req   CreateRequest
		field string
	}{
		{"bad id", CreateRequest{SessionID: "../etc"}, "session_id"},
		{"language", CreateRequest{Language: "ruby"}, "language"},
		{"negative budget", CreateRequest{Budget: &carryover.Budget{IterationLimit: -1}}, "budget"},
		{"cpus", CreateRequest{Sandbox: &SandboxRequest{CPUs: "many"}}, "sandbox.cpus"},
		{"memory", CreateRequest{Sandbox: &SandboxRequest{Memory: "lots"}}, "sandbox.memory"},
		{"timeout", CreateRequest{Sandbox: &SandboxRequest{TimeoutSeconds: &neg}}, "sandbox.timeout_seconds"},
		{"skills", CreateRequest{Sandbox: &SandboxRequest{Skills: "wx"}}, "sandbox.skills"},
		{"disk without disks", CreateRequest{Sandbox: &SandboxRequest{Disk: "1Gi"}}, "sandbox.disk"},
		{"disk size", CreateRequest{Sandbox: &SandboxRequest{Disk: "big"}}, "sandbox.disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, store, _ := testService(t, nil)
			_, err := s.Create(context.Background(), tc.req)
			wantCode(t, err, carryover.CodeInvalid)
			if f := carryover.ErrorOf(err).Details["field"]; f != tc.field {
				t.Errorf("details.field = %v, want %s", f, tc.field)
			}
			if recs, _ := store.ListSessions(context.Background()); len(recs) != 0 || len(s.List()) != 0 {
				t.Errorf("a refused create left %d records, %d sessions", len(recs), len(s.List()))
			}
		})
	}
}

func TestCreateConflicts(t *testing.T) {
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "dup"})
	_, err := s.Create(context.Background(), CreateRequest{SessionID: "dup"})
	wantCode(t, err, carryover.CodeConflict)

	s.BeginShutdown()
	_, err = s.Create(context.Background(), CreateRequest{SessionID: "late"})
	wantCode(t, err, carryover.CodeConflict)
	if _, err := s.Get("late"); !errors.Is(err, carryover.ErrNotFound) {
		t.Errorf("a session refused at shutdown exists: %v", err)
	}
}

func TestCreateStoreConflictForgetsSession(t *testing.T) {
	s, store, _ := testService(t, nil)
	// Another node made "taken" in the shared store: the store refuses, the service must forget it.
	if err := store.CreateSession(context.Background(), carryover.SessionRecord{ID: "taken", Doc: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Create(context.Background(), CreateRequest{SessionID: "taken"})
	wantCode(t, err, carryover.CodeConflict)
	if _, err := s.Get("taken"); !errors.Is(err, carryover.ErrNotFound) {
		t.Errorf("Get after a refused create: %v, want not found", err)
	}
}

func TestGetUnknown(t *testing.T) {
	s, _, _ := testService(t, nil)
	_, err := s.Get("nope")
	wantCode(t, err, carryover.CodeNotFound)
	for name, call := range map[string]func() error{
		"pause":  func() error { _, err := s.Pause(context.Background(), "nope"); return err },
		"patch":  func() error { _, err := s.Patch(context.Background(), "nope", nil); return err },
		"delete": func() error { return s.Delete(context.Background(), "nope") },
		"exec": func() error {
			_, err := s.Session("nope")
			return err
		},
		"events": func() error {
			_, err := s.Events(context.Background(), "nope", carryover.EventQuery{Limit: 10})
			return err
		},
	} {
		if err := call(); carryover.ErrorCode(err) != carryover.CodeNotFound {
			t.Errorf("%s of an unknown session: %v, want not_found", name, err)
		}
	}
}

func TestListOldestFirst(t *testing.T) {
	s, _, _ := testService(t, nil)
	for _, id := range []string{"c", "a", "b"} {
		mustCreate(t, s, CreateRequest{SessionID: id})
	}
	var ids []string
	for _, d := range s.List() {
		ids = append(ids, d.ID)
	}
	if !slices.Equal(ids, []string{"c", "a", "b"}) {
		t.Fatalf("List = %v, want creation order c a b", ids)
	}
}

func TestPatchMergesWithoutTouchingOldCopies(t *testing.T) {
	s, _, _ := testService(t, nil)
	before := mustCreate(t, s, CreateRequest{SessionID: "p", Data: map[string]any{"a": 1.0, "b": 2.0}})
	doc, err := s.Patch(context.Background(), "p", map[string]any{"b": 3.0, "c": 4.0})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Data["a"] != 1.0 || doc.Data["b"] != 3.0 || doc.Data["c"] != 4.0 {
		t.Errorf("data = %v", doc.Data)
	}
	if before.Data["b"] != 2.0 || len(before.Data) != 2 {
		t.Errorf("an earlier copy changed: %v", before.Data)
	}
}

func TestFailedSaveKeepsDocument(t *testing.T) {
	s, store, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "f", Data: map[string]any{"a": 1.0}})
	store.UpdateSessionFn = func(context.Context, carryover.SessionRecord) error { return errors.New("disk full") }
	if _, err := s.Patch(context.Background(), "f", map[string]any{"a": 2.0}); err == nil {
		t.Fatal("Patch succeeded although the store refused the write")
	}
	if _, err := s.Pause(context.Background(), "f"); err == nil {
		t.Fatal("Pause succeeded although the store refused the write")
	}
	doc, _ := s.Get("f")
	if doc.Data["a"] != 1.0 || doc.State != carryover.StatePending {
		t.Fatalf("document after failed saves: data %v state %s, want them unchanged", doc.Data, doc.State)
	}
}

func TestPauseResume(t *testing.T) {
	ctx := context.Background()
	s, store, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "p"})

	// pending -> paused is not a legal move.
	_, err := s.Pause(ctx, "p")
	wantCode(t, err, carryover.CodeConflict)
	// A shell command starts a pending session (no kernel needed).
	if _, err := handleOf(t, s, "p").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{}); err != nil {
		t.Fatal(err)
	}
	doc, err := s.Pause(ctx, "p")
	if err != nil || doc.State != carryover.StatePaused {
		t.Fatalf("Pause = %s, %v", doc.State, err)
	}
	if doc.RunningSince != nil {
		t.Error("paused session still has its duration clock running")
	}
	_, err = handleOf(t, s, "p").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{})
	wantCode(t, err, carryover.CodeSessionPaused)
	_, err = s.Pause(ctx, "p")
	wantCode(t, err, carryover.CodeConflict)

	doc, err = s.Resume(ctx, "p")
	if err != nil || doc.State != carryover.StateRunning || doc.RunningSince == nil {
		t.Fatalf("Resume = %s (clock %v), %v", doc.State, doc.RunningSince, err)
	}
	_, err = s.Resume(ctx, "p")
	wantCode(t, err, carryover.CodeConflict)

	want := []string{carryover.EventSessionStarted, carryover.EventExecStarted, carryover.EventExecCompleted,
		carryover.EventSessionPaused, carryover.EventSessionResumed}
	if got := store.EventTypes("p"); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestStopAndCancelWithoutKernel(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		end   func(*Service, string) (carryover.Session, error)
		state string
		event string
	}{
		{"stop", func(s *Service, id string) (carryover.Session, error) { return s.Stop(ctx, id, "done") }, carryover.StateCompleted, carryover.EventSessionCompleted},
		{"cancel", func(s *Service, id string) (carryover.Session, error) { return s.Cancel(ctx, id, "done") }, carryover.StateCancelled, carryover.EventSessionCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, store, _ := testService(t, nil)
			mustCreate(t, s, CreateRequest{SessionID: "e"})
			doc, err := tc.end(s, "e")
			if err != nil || doc.State != tc.state || doc.StopReason != "done" {
				t.Fatalf("%s = %s (%q), %v", tc.name, doc.State, doc.StopReason, err)
			}
			if got := store.EventTypes("e"); !slices.Equal(got, []string{tc.event}) {
				t.Errorf("events = %v", got)
			}
			_, err = tc.end(s, "e")
			wantCode(t, err, carryover.CodeConflict)
			_, err = handleOf(t, s, "e").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{})
			wantCode(t, err, carryover.CodeSessionClosed)
			_, err = handleOf(t, s, "e").Restart(ctx)
			wantCode(t, err, carryover.CodeSessionClosed)
		})
	}
}

func TestStartWithoutKernelFails(t *testing.T) {
	s, store, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "k"})
	_, err := s.Start(context.Background(), "k")
	wantCode(t, err, carryover.CodeInternal)
	if !errors.Is(err, mock.ErrNoKernels) {
		t.Errorf("err = %v, want it to wrap the provisioner's error", err)
	}
	doc, _ := s.Get("k")
	if doc.State != carryover.StateRunning || doc.Sandbox.Status != carryover.SandboxNone {
		t.Errorf("after a failed start: state %s sandbox %s, want running and none", doc.State, doc.Sandbox.Status)
	}
	if got := store.EventTypes("k"); !slices.Equal(got, []string{carryover.EventSessionStarted}) {
		t.Errorf("events = %v", got)
	}
}

func TestDeleteRemovesEverything(t *testing.T) {
	ctx := context.Background()
	s, store, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "d"})
	if _, err := handleOf(t, s, "d").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("d"); carryover.ErrorCode(err) != carryover.CodeNotFound {
		t.Errorf("Get after delete: %v", err)
	}
	if _, err := store.GetSession(ctx, "d"); !errors.Is(err, carryover.ErrNotFound) {
		t.Errorf("store still has the session: %v", err)
	}
	if _, err := os.Stat(s.cfg.workspace("d")); !os.IsNotExist(err) {
		t.Errorf("workspace still there: %v", err)
	}
	// The id is free again.
	mustCreate(t, s, CreateRequest{SessionID: "d"})
}

func TestHeartbeatAndReattach(t *testing.T) {
	ctx := context.Background()
	s, store, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "old", ClientID: "c"})
	mustCreate(t, s, CreateRequest{SessionID: "new", ClientID: "c"})
	mustCreate(t, s, CreateRequest{SessionID: "other", ClientID: "d"})
	if _, err := s.Cancel(ctx, "new", ""); err != nil {
		t.Fatal(err)
	}
	// An open session wins over a more recently updated closed one.
	doc, err := s.Reattach(ctx, "c")
	if err != nil || doc.ID != "old" {
		t.Fatalf("Reattach = %q, %v; want old", doc.ID, err)
	}
	if got := store.EventTypes("old"); !slices.Equal(got, []string{carryover.EventHeartbeat}) {
		t.Errorf("events of the reattached session = %v", got)
	}
	_, err = s.Reattach(ctx, "")
	wantCode(t, err, carryover.CodeInvalid)
	_, err = s.Reattach(ctx, "nobody")
	wantCode(t, err, carryover.CodeNotFound)
	// Another tenant does not see the client's sessions.
	_, err = s.Reattach(carryover.NewContextWithTenant(ctx, "acme"), "c")
	wantCode(t, err, carryover.CodeNotFound)
}

func TestRecoverFromStore(t *testing.T) {
	ctx := context.Background()
	store, prov := mock.NewStore(), &mock.Provisioner{}
	first := testServiceOn(t, store, prov, nil)
	mustCreate(t, first, CreateRequest{SessionID: "r", Data: map[string]any{"x": 1.0}})
	// As a crash would leave it: mid-rotation with a live kernel.
	if _, err := mustLive(t, first, "r").update(ctx, func(d *carryover.Session) error {
		d.State, d.Sandbox.Status = carryover.StateRotating, carryover.SandboxLive
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateSession(ctx, carryover.SessionRecord{ID: "junk", Doc: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	second := testServiceOn(t, store, prov, nil)
	doc, err := second.Get("r")
	if err != nil {
		t.Fatal(err)
	}
	if doc.State != carryover.StateRunning || doc.Sandbox.Status != carryover.SandboxHibernated || doc.Data["x"] != 1.0 {
		t.Errorf("recovered: state %s sandbox %s data %v; want running, hibernated, the data", doc.State, doc.Sandbox.Status, doc.Data)
	}
	if _, err := second.Get("junk"); err == nil {
		t.Error("an unreadable document was loaded")
	}
}

// mustLive is the live session id or a test failure.
func mustLive(t *testing.T, s *Service, id string) *Session {
	t.Helper()
	ls, err := s.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func TestForkRefusals(t *testing.T) {
	ctx := context.Background()
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "src"})
	mustCreate(t, s, CreateRequest{SessionID: "taken"})
	_, err := s.Fork(ctx, "src", ForkRequest{SessionID: "bad/id"})
	wantCode(t, err, carryover.CodeInvalid)
	_, err = s.Fork(ctx, "src", ForkRequest{SessionID: "taken"})
	wantCode(t, err, carryover.CodeConflict)
	_, err = s.Fork(ctx, "src", ForkRequest{}) // never checkpointed
	wantCode(t, err, carryover.CodeConflict)
	_, err = s.Fork(ctx, "src", ForkRequest{CheckpointID: "ckpt_nope"})
	wantCode(t, err, carryover.CodeNotFound)
	_, err = s.Fork(ctx, "nope", ForkRequest{})
	wantCode(t, err, carryover.CodeNotFound)
	if n := len(s.List()); n != 2 {
		t.Fatalf("%d sessions after refused forks, want 2", n)
	}
}

func TestAddCostRecomputesCents(t *testing.T) {
	s, _, _ := testService(t, func(c *Config) { c.CPUSecondCents = 0.5; c.GiBHourCents = 10 })
	mustCreate(t, s, CreateRequest{SessionID: "c"})
	ls := mustLive(t, s, "c")
	ls.addCost(context.Background(), 4, 0.25, 0)
	ls.addCost(context.Background(), 2, 0, 0)
	c := ls.docCopy().BudgetConsumed
	if c.CPUSeconds != 6 || c.MemoryGiBHours != 0.25 || c.CostCents != 6*0.5+0.25*10 {
		t.Fatalf("consumed = %+v", c)
	}
}
