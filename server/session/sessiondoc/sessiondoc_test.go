package sessiondoc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// noDisk is a disk check that takes any size.
func noDisk(string) error { return nil }

func TestNetworkRequestJSON(t *testing.T) {
	for _, tc := range []struct {
		in    string
		full  bool
		allow []string
		bad   bool
	}{
		{in: `true`, full: true},
		{in: `false`},
		{in: `{"allow":["pypi.org","*.github.com:443"]}`, allow: []string{"pypi.org", "*.github.com:443"}},
		{in: `{"allow":[]}`, allow: []string{}},
		{in: `{"allow":null}`, bad: true},
		{in: `{}`, bad: true},
		{in: `{"allow":[],"deny":[]}`, bad: true},
		{in: `"yes"`, bad: true},
	} {
		var n NetworkRequest
		err := json.Unmarshal([]byte(tc.in), &n)
		if (err != nil) != tc.bad {
			t.Errorf("%s: err %v", tc.in, err)
			continue
		}
		if !tc.bad && (n.Full != tc.full || (tc.allow == nil) != (n.Allow == nil) || strings.Join(n.Allow, ",") != strings.Join(tc.allow, ",")) {
			t.Errorf("%s: %+v", tc.in, n)
		}
	}
}

func TestApplySandboxRequest(t *testing.T) {
	sb := carryover.Sandbox{Network: true, TimeoutSeconds: 60}
	tmo := 0.0
	err := ApplySandbox(&sb, &SandboxRequest{CPUs: "1.5", Memory: "512Mi", TimeoutSeconds: &tmo, Skills: carryover.SkillsReadWrite,
		Network: &NetworkRequest{Allow: []string{"pypi.org"}}}, noDisk)
	if err != nil {
		t.Fatal(err)
	}
	if sb.CPUs != "1.5" || sb.Memory != "512Mi" || sb.TimeoutSeconds != 0 || sb.Skills != carryover.SkillsReadWrite || sb.Network || len(sb.NetworkAllow) != 1 {
		t.Fatalf("sandbox = %+v", sb)
	}
	if err := ApplySandbox(&sb, &SandboxRequest{Network: &NetworkRequest{Allow: []string{"bad host"}}}, noDisk); carryover.ErrorCode(err) != carryover.CodeInvalid {
		t.Fatalf("a bad allowlist: %v", err)
	}
}

func TestForkDocCopiesSettingsNotUse(t *testing.T) {
	now := time.Now().UTC()
	src := carryover.Session{ID: "a", Name: "n", ClientID: "c", State: carryover.StateRunning, Tenant: "t",
		Data: map[string]any{"k": map[string]any{"deep": 1.0}}, Budget: carryover.Budget{IterationLimit: 3},
		BudgetConsumed: carryover.BudgetConsumed{Iterations: 2}, ExecutionCount: 7,
		AgentContext: carryover.AgentContext{WorkingDir: "/workspace/x", EnvVars: map[string]string{"A": "1"}}}
	d := Fork(src, "b", now)
	if d.ID != "b" || d.Name != "n" || d.ClientID != "" || d.State != carryover.StatePending || d.Tenant != "t" {
		t.Fatalf("fork = %+v", d)
	}
	if d.Budget.IterationLimit != 3 || d.BudgetConsumed.Iterations != 0 || d.AgentContext.WorkingDir != "/workspace/x" {
		t.Fatalf("fork budget %+v used %+v context %+v", d.Budget, d.BudgetConsumed, d.AgentContext)
	}
	d.Data["k"].(map[string]any)["deep"] = 2.0
	d.AgentContext.EnvVars["A"] = "2"
	if src.Data["k"].(map[string]any)["deep"] != 1.0 || src.AgentContext.EnvVars["A"] != "1" {
		t.Fatal("the fork shares maps with its source")
	}
}

func TestFromCreate(t *testing.T) {
	owner := "n1"
	n := Node{SandboxTimeoutSeconds: 60, Network: true, OwnerNode: &owner, CheckDisk: func(d string) error {
		if d == "9Gi" {
			return carryover.Errorf(carryover.CodeInvalid, "too big")
		}
		return nil
	}}
	doc, err := FromCreate(CreateRequest{Name: "x", Language: "python", ClientID: "c", Sandbox: &SandboxRequest{Disk: "1Gi"}}, "s1", "t", n)
	if err != nil {
		t.Fatal(err)
	}
	if doc.ID != "s1" || doc.Tenant != "t" || doc.ClientID != "c" || doc.State != carryover.StatePending || doc.Sandbox.Disk != "1Gi" ||
		doc.Sandbox.TimeoutSeconds != 60 || !doc.Sandbox.Network || doc.OwnerNode != &owner || doc.Data == nil || doc.AgentContext.WorkingDir != "/workspace" {
		t.Fatalf("doc = %+v", doc)
	}
	for _, req := range []CreateRequest{{Language: "cobol"}, {Sandbox: &SandboxRequest{Disk: "9Gi"}}, {Sandbox: &SandboxRequest{CPUs: "lots"}}} {
		if _, err := FromCreate(req, "s1", "t", n); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("%+v: %v", req, err)
		}
	}
	if _, err := FromCreate(CreateRequest{}, "bad id!", "t", n); carryover.ErrorCode(err) != carryover.CodeInvalid {
		t.Errorf("a bad id: %v", err)
	}
}

func TestSettingsRoundTrip(t *testing.T) {
	src := carryover.Session{ID: "a", Name: "n", Language: "python", Tenant: "t", ExecutionCount: 4,
		Data: map[string]any{"k": "v"}, Budget: carryover.Budget{IterationLimit: 3},
		Sandbox:      carryover.Sandbox{CPUs: "1", Memory: "1Gi", Disk: "2Gi", NetworkAllow: []string{"pypi.org"}, Skills: carryover.SkillsReadWrite},
		AgentContext: carryover.AgentContext{WorkingDir: "/workspace/sub", EnvVars: map[string]string{"A": "1"}}}
	raw, err := SettingsOf(src)
	if err != nil {
		t.Fatal(err)
	}
	doc, warnings, err := FromSettings(raw, "b", "u", Node{CheckDisk: noDisk, Disks: true})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("import: %v %v", warnings, err)
	}
	if doc.ID != "b" || doc.Tenant != "u" || doc.ExecutionCount != 4 || doc.Data["k"] != "v" || doc.Budget.IterationLimit != 3 ||
		doc.Sandbox.Disk != "2Gi" || doc.Sandbox.CPUs != "1" || strings.Join(doc.Sandbox.NetworkAllow, ",") != "pypi.org" ||
		doc.Sandbox.Skills != carryover.SkillsReadWrite || doc.AgentContext.WorkingDir != "/workspace/sub" || doc.AgentContext.EnvVars["A"] != "1" {
		t.Fatalf("imported = %+v", doc)
	}
	doc, warnings, err = FromSettings(raw, "b", "u", Node{CheckDisk: func(d string) error {
		if d != "" {
			return errors.New("asked") // the disk was not dropped
		}
		return nil
	}})
	if err != nil || len(warnings) != 1 || doc.Sandbox.Disk != "" {
		t.Fatalf("a disk this node cannot give: %+v %v %v", doc.Sandbox, warnings, err)
	}
	var bad map[string]any
	_ = json.Unmarshal(raw, &bad)
	bad["agent_context"] = map[string]any{"working_dir": "/etc"}
	raw, _ = json.Marshal(bad)
	if _, _, err := FromSettings(raw, "b", "u", Node{CheckDisk: noDisk}); carryover.ErrorCode(err) != carryover.CodeInvalid {
		t.Fatalf("a working dir outside the workspace: %v", err)
	}
	if _, _, err := FromSettings([]byte("{"), "b", "u", Node{CheckDisk: noDisk}); carryover.ErrorCode(err) != carryover.CodeInvalid {
		t.Fatalf("corrupt settings: %v", err)
	}
}

func TestRelocate(t *testing.T) {
	r := Relocate("/data/workspaces/a", "/data/workspaces/b")
	for in, want := range map[string]string{"/data/workspaces/a": "/data/workspaces/b", "/data/workspaces/a/x": "/data/workspaces/b/x",
		"/data/workspaces/ab": "/data/workspaces/ab", "/workspace/x": "/workspace/x"} {
		if got := r(in); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
	if got := Relocate("/workspace", "/d/b")("/workspace/x"); got != "/workspace/x" {
		t.Errorf("a sandboxed source moved: %q", got)
	}
}

func TestForkCount(t *testing.T) {
	for c, ok := range map[int]bool{0: false, 1: true, MaxForkCount: true, MaxForkCount + 1: false} {
		if _, err := ForkCount(&c); (err == nil) != ok {
			t.Errorf("count %d: %v", c, err)
		}
	}
	if n, err := ForkCount(nil); n != 1 || err != nil {
		t.Errorf("absent: %d %v", n, err)
	}
}
