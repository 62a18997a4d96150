package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// step is one HTTP call of a documented flow and what must come back.
type step struct {
	method, path string
	body         any
	status       int
	check        func(t *testing.T, r resp)
}

func run(id, code string, check func(t *testing.T, r resp)) step {
	return step{"POST", "/api/sessions/" + id + "/run", map[string]any{"code": code}, 200, check}
}

func stdoutIs(want string) func(t *testing.T, r resp) {
	return func(t *testing.T, r resp) {
		t.Helper()
		if got := r.str("stdout"); got != want {
			t.Fatalf("stdout = %q, want %q (body %s)", got, want, r.Body)
		}
		if r.str("status") != "ok" {
			t.Fatalf("status = %q, want ok: %s", r.str("status"), r.Body)
		}
	}
}

func okRun(t *testing.T, r resp) {
	t.Helper()
	if r.str("status") != "ok" {
		t.Fatalf("status = %q: %s", r.str("status"), r.Body)
	}
}

func nameError(name string) func(t *testing.T, r resp) {
	return func(t *testing.T, r resp) {
		t.Helper()
		if r.str("status") != "error" || r.str("error", "ename") != "NameError" || !strings.Contains(r.str("error", "evalue"), name) {
			t.Fatalf("want NameError for %s, got %s", name, r.Body)
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
			{"GET", "/api/sessions/" + s("files") + "/files/config.json", nil, 200, func(t *testing.T, r resp) {
				if string(r.Body) != `{"setting": "value"}` {
					t.Fatalf("file body %q", r.Body)
				}
			}},
		},
		"imports": {
			run(s("imports"), "import json\nimport math\nfrom datetime import datetime", okRun),
			run(s("imports"), "data = {\"timestamp\": datetime.now().isoformat()}\nprint(json.dumps(data))\nprint(math.sqrt(16))", func(t *testing.T, r resp) {
				okRun(t, r)
				if !strings.HasPrefix(r.str("stdout"), `{"timestamp": "`) || !strings.HasSuffix(r.str("stdout"), "4.0\n") {
					t.Fatalf("stdout %q", r.str("stdout"))
				}
			}),
		},
		"metadata": {
			{"POST", "/api/sessions", map[string]any{"language": "python", "session_id": s("meta"), "data": map[string]any{"user_id": "123", "workspace": "analytics"}}, 201, nil},
			{"GET", "/api/sessions/" + s("meta"), nil, 200, func(t *testing.T, r resp) {
				if r.str("session", "data", "user_id") != "123" || r.str("session", "data", "workspace") != "analytics" {
					t.Fatalf("data not kept: %s", r.Body)
				}
			}},
			{"POST", "/api/sessions/" + s("meta") + "/run", map[string]any{"code": "result = 42\nprint(f\"Computed: {result}\")",
				"update_data": map[string]any{"last_result": 42, "computation_count": 1, "updated_at": "2024-10-23T10:30:00Z"}}, 200, stdoutIs("Computed: 42\n")},
			{"GET", "/api/sessions/" + s("meta"), nil, 200, func(t *testing.T, r resp) {
				if r.str("session", "data", "last_result") != "42" || r.str("session", "data", "updated_at") != "2024-10-23T10:30:00Z" || r.str("session", "data", "user_id") != "123" {
					t.Fatalf("update_data not merged: %s", r.Body)
				}
			}},
		},
		"isolation": {
			run(s("session-a"), "shared_data = \"This is session A\"", okRun),
			run(s("session-b"), "print(shared_data)", nameError("shared_data")),
			run(s("session-a"), "print(shared_data)", stdoutIs("This is session A\n")),
		},
		"ephemeral": {
			{"POST", "/api/execute", map[string]any{"language": "python", "code": "data = [1, 2, 3]\nprint(len(data))"}, 200, func(t *testing.T, r resp) {
				if r.str("stdout") != "3\n" || r.get("checkpoint") != nil {
					t.Fatalf("ephemeral: %s", r.Body)
				}
			}},
			{"POST", "/api/execute", map[string]any{"language": "python", "code": "print(data)"}, 200, nameError("data")},
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
		ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": id + sfx, "language": "python"})
	}
}

var flowOrder = []string{"counter", "config_file", "imports", "metadata", "isolation", "ephemeral", "app_config", "logger", "workflow", "cache", "migration"}

func doStep(t *testing.T, ts *testServer, st step) {
	t.Helper()
	r := ts.do(st.method, st.path, st.body)
	if r.Status != st.status {
		t.Fatalf("%s %s: status %d, want %d: %s", st.method, st.path, r.Status, st.status, r.Body)
	}
	if st.check != nil {
		st.check(t, r)
	}
}

// TestERAFlows runs every documented ERA example against a real server.
func TestERAFlows(t *testing.T) {
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
// each session comes back from SQLite and its last checkpoint.
func TestERAFlowsSurviveRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts take a while")
	}
	ts := startServer(t, "")
	createAll(t, ts, "-r")
	flows := eraFlows("-r")
	for _, name := range flowOrder {
		for i, st := range flows[name] {
			if i > 0 {
				ts = ts.restart()
			}
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) { doStep(t, ts, st) })
		}
	}
}
