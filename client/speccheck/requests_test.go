package speccheck

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carryover/carryover/client"
)

// TestClientRequestsValidate marshals request bodies the client sends, every field set, and
// validates the JSON against the spec's schemas. It covers what TestClientTypesMatchSpec cannot
// see in the source: custom MarshalJSON methods (SandboxRequest sends NetworkAllow as
// "network": {"allow": [...]}) and the values of interface fields (ExecRequest.Command).
func TestClientRequestsValidate(t *testing.T) {
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020) // OpenAPI 3.1's schemas are JSON Schema 2020-12
	if err := comp.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	const fork = "openapi.json#/paths/~1api~1sessions~1{id}~1fork/post/requestBody/content/application~1json/schema"
	sec := client.Seconds(5)
	yes := true
	cases := []struct {
		name, schema string
		body         any
	}{
		{"create, network bool", "CreateRequest", client.CreateRequest{
			SessionID: "s1", Name: "n", Language: "python", Data: map[string]any{"k": 1},
			Budget:   &client.Budget{CostCapCents: 1.5, IterationLimit: 3, DurationLimitSeconds: 60},
			Sandbox:  &client.SandboxRequest{CPUs: "2", Memory: "4Gi", Disk: "20Gi", TimeoutSeconds: sec, Network: &yes, Skills: "rw"},
			Rotation: &client.Rotation{PreRotateBufferSeconds: 30}, ClientID: "c", Start: true}},
		{"create, network allowlist", "CreateRequest", client.CreateRequest{
			Sandbox: &client.SandboxRequest{NetworkAllow: []string{"pypi.org", "*.example.com:8443"}}}},
		{"create, empty", "CreateRequest", client.CreateRequest{}},
		{"context", "ContextRequest", client.ContextRequest{WorkingDir: new(string),
			EnvVars: map[string]string{"A": "1"}, CustomState: map[string]any{"x": []int{1}}}},
		{"run", "RunRequest", client.RunRequest{Code: "1", UpdateData: map[string]any{"a": 1}, TimeoutSeconds: sec, Env: map[string]string{"A": "1"}}},
		{"exec, shell", "ExecRequest", client.ExecRequest{Command: "ls", WorkingDir: "/workspace", Env: map[string]string{"A": "1"}, TimeoutSeconds: sec}},
		{"exec, argv", "ExecRequest", client.ExecRequest{Command: []string{"ls", "-l"}}},
		{"execute", "ExecuteRequest", client.ExecuteRequest{Language: "python", Code: "1", TimeoutSeconds: sec}},
		{"tool", "Tool", client.ToolRequest{Name: "t", ToolType: "custom", Description: "d", InputSchema: map[string]any{"type": "object"}}},
		{"file", "FileWriteRequest", client.FileRequest{Path: "a.txt", Content: "aGk=", Encoding: "base64"}},
		{"fork", fork, client.ForkRequest{SessionID: "s2", CheckpointID: "c1", Count: 5}},
		{"create key", "CreateKeyRequest", client.CreateKeyRequest{Tenant: "acme", Scope: client.ScopeRun, Name: "ci", ExpiresAt: new(time.Now().UTC())}},
	}
	for _, tc := range cases {
		loc := tc.schema
		if loc != fork {
			loc = "openapi.json#/components/schemas/" + loc
		}
		sch, err := comp.Compile(loc)
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		raw, err := json.Marshal(tc.body)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s: %s does not validate against %s: %v", tc.name, raw, tc.schema, err)
		}
	}
}
