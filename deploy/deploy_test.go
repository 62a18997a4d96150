package deploy_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
)

// configKeys are the documented config keys (configs/carryover.yaml), as viper flattens them.
func configKeys(t *testing.T) map[string]bool {
	v, err := configs.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, k := range v.AllKeys() {
		keys[k] = true
	}
	return keys
}

// checkConfigFile fails for every key of the YAML config text that carryover does not have.
func checkConfigFile(t *testing.T, what, text string) *viper.Viper {
	t.Helper()
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(strings.NewReader(text)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	keys := configKeys(t)
	for _, k := range v.AllKeys() {
		if !keys[k] {
			t.Errorf("%s sets %q, which is no config key of carryover's", what, k)
		}
	}
	return v
}

// envKey maps CARRYOVER_CLUSTER_NODE_ID to the config key it sets (cluster.node_id), or "".
func envKey(t *testing.T, name string) string {
	for k := range configKeys(t) {
		if "CARRYOVER_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_")) == name {
			return k
		}
	}
	return ""
}

// probeIsRoute checks that path answers 200 without a token on a real server.
func probeIsRoute(t *testing.T, path string) {
	t.Helper()
	cfg := servertest.Config(t.TempDir(), "deploy-test-token")
	cfg.Pool.Size = 0 // no kernel needed
	srv := servertest.Start(t, cfg)
	res, err := http.Get(srv.Base + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("probe path %s answers %d (%s) without a token", path, res.StatusCode, body)
	}
}

// unit parses a systemd unit into section -> key -> values.
func unit(t *testing.T, path string) map[string]map[string][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	sec := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			sec = strings.Trim(line, "[]")
			out[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("%s: bad line %q", path, line)
			}
			out[sec][k] = append(out[sec][k], v)
		}
	}
	return out
}

// The systemd unit: it runs serve with a config file, as root with the cgroup subtree delegated,
// stops with SIGTERM to carryover alone and waits long enough for the drain; systemd itself finds
// nothing wrong with it (systemd-analyze verify, with the binary put where ExecStart names it).
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	u := unit(t, "carryover.service")
	s := u["Service"]
	want := map[string]string{"User": "root", "Delegate": "yes", "KillMode": "mixed", "KillSignal": "SIGTERM", "ProtectSystem": "strict"}
	for k, v := range want {
		if len(s[k]) != 1 || s[k][0] != v {
			t.Errorf("[Service] %s = %v, want %s", k, s[k], v)
		}
	}
	if len(s["ExecStart"]) != 1 || !strings.Contains(s["ExecStart"][0], " serve -c /etc/carryover/carryover.yaml") {
		t.Errorf("ExecStart = %v", s["ExecStart"])
	}
	for _, k := range []string{"ProtectControlGroups", "PrivateDevices", "RestrictNamespaces", "PrivateUsers", "DynamicUser"} {
		if len(s[k]) > 0 && s[k][0] != "no" {
			t.Errorf("%s=%s breaks the sandbox (see the unit's comments)", k, s[k][0])
		}
	}
	stop, _ := strconv.Atoi(firstOr(s["TimeoutStopSec"], "0"))
	grace := defaultGrace(t)
	if stop < 2*grace+15 {
		t.Errorf("TimeoutStopSec=%d is under twice server.shutdown_grace_seconds (%d) plus 15 s", stop, grace)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze not installed: verify skipped")
		return
	}
	bin := servertest.MustBinary(t)
	body, err := os.ReadFile("carryover.service")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "carryover.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(body, []byte("/usr/local/bin/carryover"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func firstOr(v []string, def string) string {
	if len(v) == 0 {
		return def
	}
	return v[0]
}

func defaultGrace(t *testing.T) int {
	return configs.Default().Server.ShutdownGraceSeconds
}

// The container image: a scratch image of build.sh's root file system (no base image pulled),
// whose default config sets only real keys; build.sh parses, and the Debian packages it installs
// exist (where apt-cache can tell).
func TestContainerImage(t *testing.T) {
	t.Parallel()
	cf, err := os.ReadFile("container/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(string(cf), -1)
	if len(froms) != 1 || froms[0][1] != "scratch" {
		t.Fatalf("Containerfile must build FROM scratch alone, has %v", froms)
	}
	build, err := os.ReadFile("container/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^(?:ADD|COPY)\s+(\S+)`).FindAllStringSubmatch(string(cf), -1) {
		if !bytes.Contains(build, []byte(m[1])) {
			t.Errorf("the Containerfile takes %s, which build.sh does not make", m[1])
		}
	}
	if out, err := exec.Command("sh", "-n", "container/build.sh").CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v %s", err, out)
	}
	cfg, err := os.ReadFile("container/carryover.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkConfigFile(t, "container/carryover.yaml", string(cfg))
	m := regexp.MustCompile(`(?s)PACKAGES="([^"]*)"`).FindSubmatch(build)
	if m == nil {
		t.Fatal("build.sh: no PACKAGES")
	}
	pkgs := strings.Fields(strings.ReplaceAll(string(m[1]), "\\", " "))
	if _, err := exec.LookPath("apt-cache"); err != nil {
		t.Log("apt-cache not installed: package names not checked")
		return
	}
	out, err := exec.Command("apt-cache", append([]string{"show", "--no-all-versions"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Errorf("build.sh installs packages apt-cache does not know: %v\n%s", err, lastLines(out))
	}
	for _, p := range pkgs {
		if !bytes.Contains(out, []byte("Package: "+p+"\n")) {
			t.Errorf("build.sh installs %s, which apt-cache does not know", p)
		}
	}
}

// doc is one manifest as a generic map.
type doc = map[string]any

func get(d any, path ...string) any {
	for _, p := range path {
		m, ok := d.(doc)
		if !ok {
			return nil
		}
		d = m[p]
	}
	return d
}

func manifests(t *testing.T, path string) []doc {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var out []doc
	for {
		var d doc
		err := dec.Decode(&d)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d == nil {
			continue
		}
		for _, f := range []string{"apiVersion", "kind"} {
			if s, _ := d[f].(string); s == "" {
				t.Errorf("%s: a document without %s", path, f)
			}
		}
		if s, _ := get(d, "metadata", "name").(string); s == "" {
			t.Errorf("%s: a %v without metadata.name", path, d["kind"])
		}
		out = append(out, d)
	}
	return out
}

func byKind(ds []doc, kind, name string) doc {
	for _, d := range ds {
		if d["kind"] == kind && (name == "" || get(d, "metadata", "name") == name) {
			return d
		}
	}
	return nil
}

// The Kubernetes manifests: well-formed objects; a StatefulSet whose selector matches its pods and
// whose serviceName is the headless service; a config of real keys (and env variables naming real
// keys) that carryover accepts; a readiness probe on a real route that answers without a token; a
// privileged container (the sandbox); a grace period covering the drain; secrets the example has.
func TestKubernetesManifests(t *testing.T) {
	ds := manifests(t, "kubernetes/carryover.yaml")
	secret := manifests(t, "kubernetes/secret.example.yaml")
	sts := byKind(ds, "StatefulSet", "carryover")
	if sts == nil {
		t.Fatal("no StatefulSet carryover")
	}
	headless := byKind(ds, "Service", get(sts, "spec", "serviceName").(string))
	if headless == nil || get(headless, "spec", "clusterIP") != "None" {
		t.Errorf("serviceName %v is no headless Service", get(sts, "spec", "serviceName"))
	}
	labels, _ := get(sts, "spec", "template", "metadata", "labels").(doc)
	sel, _ := get(sts, "spec", "selector", "matchLabels").(doc)
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("selector %s=%v does not match the pod labels %v", k, v, labels)
		}
	}
	cm := byKind(ds, "ConfigMap", "carryover")
	text, _ := get(cm, "data", "carryover.yaml").(string)
	cv := checkConfigFile(t, "the ConfigMap's carryover.yaml", text)
	containers, _ := get(sts, "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	c := containers[0]
	if get(c, "securityContext", "privileged") != true {
		t.Error("the container is not privileged: the sandbox cannot build its boxes (see the manifest's comment)")
	}
	envs, _ := get(c, "env").([]any)
	secretKeys, _ := get(byKind(secret, "Secret", "carryover"), "stringData").(doc)
	setEnv := map[string]string{}
	for _, e := range envs {
		name, _ := get(e, "name").(string)
		if strings.HasPrefix(name, "CARRYOVER_") && envKey(t, name) == "" {
			t.Errorf("env %s names no config key", name)
		}
		if ref, ok := get(e, "valueFrom", "secretKeyRef", "key").(string); ok {
			if _, ok := secretKeys[ref]; !ok {
				t.Errorf("env %s reads secret key %q, which secret.example.yaml does not have", name, ref)
			}
			setEnv[name] = "placeholder"
		}
	}
	// carryover accepts the config with the secrets in place.
	file := filepath.Join(t.TempDir(), "carryover.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for k := range setEnv {
		t.Setenv(k, "placeholder")
	}
	cfg, err := configs.Load(file, nil)
	if err != nil {
		t.Fatalf("carryover refuses the ConfigMap's config: %v", err)
	}
	// The probes: a real route, on the container's named port.
	ports, _ := get(c, "ports").([]any)
	probed := map[string]bool{}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		path, _ := get(c, probe, "httpGet", "path").(string)
		port := get(c, probe, "httpGet", "port")
		if path == "" {
			t.Fatalf("no %s.httpGet.path", probe)
		}
		found := false
		for _, p := range ports {
			if get(p, "name") == port || get(p, "containerPort") == port {
				found = true
				if addr := cv.GetString("server.addr"); !strings.HasSuffix(addr, ":"+strconv.Itoa(get(p, "containerPort").(int))) {
					t.Errorf("server.addr %s does not listen on containerPort %v", addr, get(p, "containerPort"))
				}
			}
		}
		if !found {
			t.Errorf("%s port %v is no container port", probe, port)
		}
		if !probed[path] {
			probeIsRoute(t, path)
			probed[path] = true
		}
	}
	grace, _ := get(sts, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)
	if g := cfg.Server.ShutdownGraceSeconds; grace < 2*g+15 {
		t.Errorf("terminationGracePeriodSeconds %d is under twice server.shutdown_grace_seconds (%d) plus 15 s", grace, g)
	}
}

func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], "\n")
}
