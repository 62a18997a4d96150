package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// step is one call of a documented flow, with what must come back.
type step struct {
	what string
	do   func(t *testing.T, ts *testServer)
}

// run is a step that runs code (200) and checks the answer.
func run(id, code string, check func(t *testing.T, r *client.RunResult)) step {
	return runReq(id, client.RunRequest{Code: code}, check)
}

// runReq is run with a whole request.
func runReq(id string, req client.RunRequest, check func(t *testing.T, r *client.RunResult)) step {
	return step{"POST /api/sessions/" + id + "/run", func(t *testing.T, ts *testServer) {
		t.Helper()
		check(t, must(t, 200, "run in "+id, func(ctx context.Context) (*client.RunResult, error) { return ts.c.Run(ctx, id, req) }))
	}}
}

// execute is a step that runs code in a throwaway session (POST /api/execute, 200).
func execute(code string, check func(t *testing.T, r *client.RunResult)) step {
	return step{"POST /api/execute", func(t *testing.T, ts *testServer) {
		t.Helper()
		check(t, must(t, 200, "execute", func(ctx context.Context) (*client.RunResult, error) {
			return ts.c.Execute(ctx, client.ExecuteRequest{Language: "python", Code: code})
		}))
	}}
}

// getSession is a step that fetches a session (200) and checks it.
func getSession(id string, check func(t *testing.T, s *client.Session)) step {
	return step{"GET /api/sessions/" + id, func(t *testing.T, ts *testServer) {
		t.Helper()
		check(t, must(t, 200, "get "+id, func(ctx context.Context) (*client.Session, error) { return ts.c.GetSession(ctx, id) }))
	}}
}

func stdoutIs(want string) func(t *testing.T, r *client.RunResult) {
	return func(t *testing.T, r *client.RunResult) {
		t.Helper()
		if r.Stdout != want {
			t.Fatalf("stdout = %q, want %q (answer %s)", r.Stdout, want, dump(r))
		}
		if r.Status != "ok" {
			t.Fatalf("status = %q, want ok: %s", r.Status, dump(r))
		}
	}
}

func okRun(t *testing.T, r *client.RunResult) {
	t.Helper()
	if r.Status != "ok" {
		t.Fatalf("status = %q: %s", r.Status, dump(r))
	}
}

func nameError(name string) func(t *testing.T, r *client.RunResult) {
	return func(t *testing.T, r *client.RunResult) {
		t.Helper()
		if r.Status != "error" || r.Error == nil || r.Error.EName != "NameError" || !strings.Contains(r.Error.EValue, name) {
			t.Fatalf("want NameError for %s, got %s", name, dump(r))
		}
	}
}

// dataIs checks the session's data has these values (compared as fmt.Sprint of the JSON values).
func dataIs(want map[string]string, what string) func(t *testing.T, s *client.Session) {
	return func(t *testing.T, s *client.Session) {
		t.Helper()
		for k, v := range want {
			if got, ok := s.Data[k]; !ok || fmt.Sprint(got) != v {
				t.Fatalf("%s: data[%q] = %v, want %s: %s", what, k, got, v, dump(s.Data))
			}
		}
	}
}

// eraFlows are the examples of shared/reference/era-agent-persistence.txt as HTTP calls. Session ids
// get a suffix so the straight and the restart variants do not collide.
func eraFlows(sfx string) map[string][]step {
	s := func(name string) string { return name + sfx }
	return map[string][]step{
		"counter": {
			run(s("my-session"), "counter = 0\nuser_data = {\"name\": \"Alice\", \"score\": 0}", okRun),
			run(s("my-session"), "counter += 1\nuser_data[\"score\"] += 10\nprint(f\"Counter: {counter}, Score: {user_data['score']}\")", stdoutIs("Counter: 1, Score: 10\n")),
		},
		"config_file": {
			run(s("files"), "with open(\"config.json\", \"w\") as f:\n f.write(\"{\\\"setting\\\": \\\"value\\\"}\")", okRun),
			run(s("files"), "with open(\"config.json\", \"r\") as f:\n config = f.read()\nprint(f\"Config: {config}\")", stdoutIs("Config: {\"setting\": \"value\"}\n")),
			{"GET /api/sessions/" + s("files") + "/files/config.json", func(t *testing.T, ts *testServer) {
				body := must(t, 200, "get config.json", func(ctx context.Context) ([]byte, error) { return ts.c.GetFile(ctx, s("files"), "config.json") })
				if string(body) != `{"setting": "value"}` {
					t.Fatalf("file body %q", body)
				}
			}},
		},
		"imports": {
			run(s("imports"), "import json\nimport math\nfrom datetime import datetime", okRun),
			run(s("imports"), "data = {\"timestamp\": datetime.now().isoformat()}\nprint(json.dumps(data))\nprint(math.sqrt(16))", func(t *testing.T, r *client.RunResult) {
				okRun(t, r)
				if !strings.HasPrefix(r.Stdout, `{"timestamp": "`) || !strings.HasSuffix(r.Stdout, "4.0\n") {
					t.Fatalf("stdout %q", r.Stdout)
				}
			}),
		},
		"metadata": {
			{"POST /api/sessions", func(t *testing.T, ts *testServer) {
				must(t, 201, "create "+s("meta"), func(ctx context.Context) (*client.Session, error) {
					return ts.c.CreateSession(ctx, client.CreateRequest{Language: "python", SessionID: s("meta"),
						Data: map[string]any{"user_id": "123", "workspace": "analytics"}})
				})
			}},
			getSession(s("meta"), dataIs(map[string]string{"user_id": "123", "workspace": "analytics"}, "data not kept")),
			runReq(s("meta"), client.RunRequest{Code: "result = 42\nprint(f\"Computed: {result}\")",
				UpdateData: map[string]any{"last_result": 42, "computation_count": 1, "updated_at": "2024-10-23T10:30:00Z"}}, stdoutIs("Computed: 42\n")),
			getSession(s("meta"), dataIs(map[string]string{"last_result": "42", "updated_at": "2024-10-23T10:30:00Z", "user_id": "123"}, "update_data not merged")),
		},
		"isolation": {
			run(s("session-a"), "shared_data = \"This is session A\"", okRun),
			run(s("session-b"), "print(shared_data)", nameError("shared_data")),
			run(s("session-a"), "print(shared_data)", stdoutIs("This is session A\n")),
		},
		"ephemeral": {
			execute("data = [1, 2, 3]\nprint(len(data))", func(t *testing.T, r *client.RunResult) {
				if r.Stdout != "3\n" || r.Checkpoint != nil {
					t.Fatalf("ephemeral: %s", dump(r))
				}
			}),
			execute("print(data)", nameError("data")),
		},
		"app_config": {
			run(s("app-session"), "import json\nconfig = {\"api_url\": \"https://api.example.com\", \"timeout\": 30}\nwith open(\"config.json\", \"w\") as f:\n json.dump(config, f)", okRun),
			run(s("app-session"), "import json\nwith open(\"config.json\", \"r\") as f:\n config = json.load(f)\nprint(f\"API URL: {config['api_url']}\")", stdoutIs("API URL: https://api.example.com\n")),
		},
		"logger": {
			run(s("logger"), "import json\nlog = []\nwith open(\"log.json\", \"w\") as f:\n json.dump(log, f)", okRun),
			run(s("logger"), "import json\nwith open(\"log.json\", \"r\") as f:\n log = json.load(f)\nlog.append({\"event\": \"user_login\", \"time\": \"10:00\"})\nwith open(\"log.json\", \"w\") as f:\n json.dump(log, f)\nprint(f\"Log entries: {len(log)}\")", stdoutIs("Log entries: 1\n")),
			run(s("logger"), "import json\nwith open(\"log.json\", \"r\") as f:\n log = json.load(f)\nlog.append({\"event\": \"user_action\", \"time\": \"10:05\"})\nwith open(\"log.json\", \"w\") as f:\n json.dump(log, f)\nprint(f\"Log entries: {len(log)}\")", stdoutIs("Log entries: 2\n")),
		},
		"workflow": {
			run(s("workflow"), "state = \"initialized\"\nsteps_completed = 0\nprint(f\"State: {state}\")", stdoutIs("State: initialized\n")),
			run(s("workflow"), "if state == \"initialized\":\n data = [1, 2, 3, 4, 5]\n state = \"data_collected\"\n steps_completed += 1\n print(f\"Data collected. State: {state}\")\nelse:\n print(f\"Invalid state: {state}\")", stdoutIs("Data collected. State: data_collected\n")),
			run(s("workflow"), "if state == \"data_collected\":\n result = sum(data) / len(data)\n state = \"processed\"\n steps_completed += 1\n print(f\"Average: {result}. State: {state}\")\nelse:\n print(f\"Invalid state: {state}\")", stdoutIs("Average: 3.0. State: processed\n")),
			run(s("workflow"), "if state == \"processed\":\n state = \"completed\"\n print(f\"Workflow completed in {steps_completed} steps\")\nelse:\n print(f\"Invalid state: {state}\")", stdoutIs("Workflow completed in 2 steps\n")),
		},
		"cache": {
			run(s("cache-demo"), "import json\nimport os\n\ndef expensive_computation(n):\n result = sum(range(n))\n return result\n\ncache_file = \"cache.json\"\nif os.path.exists(cache_file):\n with open(cache_file, \"r\") as f:\n  cache = json.load(f)\n print(\"Using cached result\")\nelse:\n result = expensive_computation(1000000)\n cache = {\"result\": result}\n with open(cache_file, \"w\") as f:\n  json.dump(cache, f)\n print(\"Computed and cached result\")\n\nprint(f\"Result: {cache['result']}\")", stdoutIs("Computed and cached result\nResult: 499999500000\n")),
			run(s("cache-demo"), "import json\nwith open(\"cache.json\", \"r\") as f:\n cache = json.load(f)\nprint(f\"Cached result: {cache['result']}\")", stdoutIs("Cached result: 499999500000\n")),
			run(s("cache-demo"), "print(expensive_computation(10))", stdoutIs("45\n")),
		},
		"migration": {
			run(s("migrate"), "# Initialize session\nimport json\nimport os\n\nif not os.path.exists(\"config.json\"):\n    config = {\"version\": \"1.0\", \"initialized\": True}\n    with open(\"config.json\", \"w\") as f:\n        json.dump(config, f)\n\nif \"state\" not in dir():\n    state = {\"runs\": 0}\n\nprint(\"Session initialized\")", stdoutIs("Session initialized\n")),
			run(s("migrate"), "import json\nwith open(\"data.json\", \"w\") as f:\n    json.dump({\"version\": \"1.0\", \"items\": [1]}, f)", okRun),
			run(s("migrate"), "import json\n\nVERSION = \"2.0\"\n\ntry:\n    with open(\"data.json\", \"r\") as f:\n        data = json.load(f)\n    if data.get(\"version\", \"1.0\") != VERSION:\n        print(f\"Migrating from {data.get('version')} to {VERSION}\")\n        data[\"version\"] = VERSION\n        with open(\"data.json\", \"w\") as f:\n            json.dump(data, f)\nexcept FileNotFoundError:\n    data = {\"version\": VERSION, \"items\": []}\n    with open(\"data.json\", \"w\") as f:\n        json.dump(data, f)", stdoutIs("Migrating from 1.0 to 2.0\n")),
			run(s("migrate"), "print(VERSION, data['version'], data['items'], state)", stdoutIs("2.0 2.0 [1] {'runs': 0}\n")),
		},
	}
}

// eraSessions are created first, as a client does before running in them (API.md: unknown -> 404).
var eraSessions = []string{"my-session", "files", "imports", "session-a", "session-b", "app-session", "logger", "workflow", "cache-demo", "migrate"}

func createAll(t *testing.T, ts *testServer, sfx string) {
	for _, id := range eraSessions {
		ts.newSession(client.CreateRequest{SessionID: id + sfx, Language: "python"})
	}
}

var flowOrder = []string{"counter", "config_file", "imports", "metadata", "isolation", "ephemeral", "app_config", "logger", "workflow", "cache", "migration"}

func doStep(t *testing.T, ts *testServer, st step) {
	t.Helper()
	t.Logf("%s", st.what)
	st.do(t, ts)
}

// TestERAFlows runs every documented ERA example against a real server.
func TestERAFlows(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	createAll(t, ts, "")
	flows := eraFlows("")
	for _, name := range flowOrder {
		t.Run(name, func(t *testing.T) {
			for _, st := range flows[name] {
				doStep(t, ts, st)
			}
		})
	}
}

// TestERAFlowsSurviveRestarts runs the same flows with a server restart between every two calls:
// each session comes back from SQLite and its last checkpoint. Each flow has a server of its own,
// the flows side by side (one after the other they took 94 s, the longest test of this package),
// and no warm pool: every restart's restore would take the pool's kernel, and the refill started
// beside it was never used (30 restarts, 30 kernels started for nothing).
func TestERAFlowsSurviveRestarts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("restarts take a while")
	}
	noPool := func(c *configs.Config) { c.Pool.Size = 0 }
	flows := eraFlows("-r")
	for _, name := range flowOrder {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ts := startServer(t, "", noPool)
			createAll(t, ts, "-r")
			for i, st := range flows[name] {
				if i > 0 {
					ts.stop()
					ts = startServer(t, ts.dir, noPool)
				}
				t.Run(strconv.Itoa(i), func(t *testing.T) { doStep(t, ts, st) })
			}
		})
	}
}
