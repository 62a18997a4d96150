package clustertest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/internal/servertest"
)

// portableCells build a session holding what the restore-fidelity corpus checks, over several
// turns: numpy views of a base and an alias, a pandas frame (categorical, datetimes, strings),
// records, a closure, a lambda, a class and an instance of it, the global random generators and a
// numpy Generator, a fitted sklearn model sharing its training data, a generator (not picklable:
// rebuilt by replay), env and cwd changes, workspace files and a file under the packages dir. An
// open file (fh) is there too: saved by its host path without the sandbox, it is named as failed on
// the other server (probe).
var portableCells = []string{
	`import numpy as np, pandas as pd, random, os, json
np.random.seed(4); random.seed(4)
big = np.arange(3_000_000, dtype=np.float64)      # 24 MB: chunks in S3 on the importing side
v = big[10:20]; b2 = big
df = pd.DataFrame({"k": pd.Categorical(["a", "b", "a"] * 1000), "t": pd.date_range("2024-01-01", periods=3000, freq="h"),
                   "s": [f"row{i}" for i in range(3000)], "x": np.random.rand(3000)})
rec = [{"id": i, "tags": ["t", str(i % 5)]} for i in range(2000)]`,
	`def make_adder(n):
    return lambda x: x + n
add5 = make_adder(5)
sq = lambda x: x * x
class Point:
    def __init__(self, x, y): self.x, self.y = x, y
    def norm(self): return (self.x ** 2 + self.y ** 2) ** 0.5
p = Point(3, 4)
rng = np.random.default_rng(11); rng.random(3)
random.random(); np.random.rand(2)`,
	`from sklearn.linear_model import LinearRegression
X = np.random.rand(200, 3); y = X @ np.array([1.0, 2.0, 3.0]) + 0.5
model = LinearRegression().fit(X, y)
g = (i * i for i in range(10)); next(g)`,
	`os.makedirs("sub", exist_ok=True); os.makedirs(".packages/lib", exist_ok=True)
open("sub/notes.txt", "w").write("kept notes")
open(".packages/lib/mypkg.py", "w").write("VALUE = 42\n")
df.to_csv("frame.csv")
fh = open("sub/notes.txt"); fh.read(4)
os.environ["PORTABLE_VAR"] = "yes"
os.chdir("sub")`,
}

// portableProbe prints what must come back equal; it draws from the generators, so two sessions in
// the same state print the same. withGen adds the replayed generator's next value.
func portableProbe(withGen bool) string {
	gen := ""
	if withGen {
		gen = `, "gen": next(g)`
	}
	return `import hashlib
_h = lambda b: hashlib.sha256(b).hexdigest()[:16]
print(json.dumps({"view": v.base is big, "alias": b2 is big, "big": _h(big.tobytes()), "v": v.tolist(),
  "df": _h(pd.util.hash_pandas_object(df, index=True).values.tobytes()), "dtypes": {k: str(t) for k, t in df.dtypes.items()},
  "rec": _h(json.dumps(rec).encode()), "add5": add5(3), "sq": sq(7), "norm": p.norm(), "cls": type(p).__name__,
  "random": random.random(), "np": float(np.random.rand()), "rng": float(rng.random()),
  "coef": [round(float(c), 9) for c in model.coef_], "model_X": bool(np.shares_memory(X, X)),
  "env": os.environ.get("PORTABLE_VAR"),
  "cwd": os.path.basename(os.getcwd()), "notes": open("notes.txt").read(), "pkg": open("../.packages/lib/mypkg.py").read(),
  "csv": _h(open("../frame.csv", "rb").read())` + gen + `}, sort_keys=True))`
}

// TestExportImportSQLiteToPostgresS3: a session made on a SQLite server is exported and imported
// into a PostgreSQL + S3 node. Its first run there prints what the source prints (variables,
// generators, the model, files, packages, env, cwd, the generator rebuilt by replay), and so does a
// run after a kill -9 of the importing kernel. The same archive imported again writes no chunk.
// Damaged archives are refused with their reason and leave no session and no file.
func TestExportImportSQLiteToPostgresS3(t *testing.T) {
	src := servertest.StartProcess(t, servertest.Options{Token: testToken, Flags: []string{"--pool.size", "0"},
		Env: []string{"CARRYOVER_SANDBOX_ENABLED=false"}})
	sc := client.New(src.Base, testToken)
	gw := s3test.Shared(t)
	dsn, bucket := pgtest.NewDB(t), s3test.NewBucket()
	dst := startNode(t, "dst", dsn, s3Env(gw.Endpoint, bucket)...)
	ctx := t.Context()

	if _, err := sc.CreateSession(ctx, client.CreateRequest{SessionID: "port", Name: "portable"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range portableCells {
		if r, err := sc.Run(ctx, "port", client.RunRequest{Code: c}); err != nil || r.Status != "ok" {
			t.Fatalf("source cell: %v %+v", err, r)
		}
	}
	var arch bytes.Buffer
	if err := sc.ExportSession(ctx, "port", "", &arch); err != nil {
		t.Fatal(err)
	}
	want1 := probe(t, sc, "port", true)

	res, err := dst.c.ImportSession(ctx, bytes.NewReader(arch.Bytes()), "moved")
	if err != nil {
		t.Fatal(err)
	}
	if res.Session.ID != "moved" || res.Session.Name != "portable" || res.Source.SessionID != "port" || res.ChunksPresent != 0 || res.BytesWritten == 0 {
		t.Fatalf("import answer %+v", res)
	}
	if n := countObjects(t, gw.Endpoint, bucket); n == 0 {
		t.Fatal("no chunk in S3 after importing a 24 MB array")
	}
	if got := probe(t, dst.c, "moved", true); got != want1 {
		t.Fatalf("first run after the import:\n%s\nthe source:\n%s", got, want1)
	}
	if r, err := dst.c.Run(ctx, "moved", client.RunRequest{Code: "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"}); err == nil && r.Status == "ok" {
		t.Fatal("the kernel survived its kill")
	}
	if got, want := probe(t, dst.c, "moved", false), probe(t, sc, "port", false); got != want {
		t.Fatalf("after a kill -9 of the importing kernel:\n%s\nthe source:\n%s", got, want)
	}

	again, err := dst.c.ImportSession(ctx, bytes.NewReader(arch.Bytes()), "")
	if err != nil {
		t.Fatal(err)
	}
	if again.ChunksPresent != again.Chunks || again.BytesWritten != 0 {
		t.Fatalf("second import: %d of %d chunks present, %d bytes written", again.ChunksPresent, again.Chunks, again.BytesWritten)
	}
	refuseOnNode(t, dst, arch.Bytes())
}

// probe runs portableProbe in session id and returns its output.
func probe(t *testing.T, c *client.Client, id string, withGen bool) string {
	t.Helper()
	r, err := c.Run(t.Context(), id, client.RunRequest{Code: portableProbe(withGen)})
	if err != nil || r.Status != "ok" {
		t.Fatalf("probe in %s: %v %+v", id, err, r)
	}
	if r.Restore != nil {
		// An open file of an unsandboxed kernel is saved by its host path, which does not exist on
		// another server: it is named, with why (docs/export-format.md). Nothing else may fail.
		for _, f := range r.Restore.Failed {
			if f.Name != "fh" || !strings.Contains(f.Reason, "no longer exists") {
				t.Fatalf("restore in %s: failed %+v", id, r.Restore.Failed)
			}
		}
		for _, f := range r.Restore.NotReplayed { // its turn wrote files: never run twice
			if f.Name != "fh" {
				t.Fatalf("restore in %s: not replayed %+v", id, r.Restore.NotReplayed)
			}
		}
	}
	return strings.TrimSpace(r.Stdout)
}

// refuseOnNode imports damaged versions of arch into n: each is refused with its reason, and the
// node holds no more sessions than before, and no file outside its data dir.
func refuseOnNode(t *testing.T, n *node, arch []byte) {
	escape := filepath.Join(os.TempDir(), "carryover-portable-escape-"+servertest.ID(t))
	cases := []struct {
		name, reason string
		body         []byte
	}{
		{"truncated", "truncated", arch[:len(arch)*2/3]},
		{"tampered", "digest", tamper(arch)},
		{"path traversal", "path", resealed(t, arch, func(m map[string]any) {
			m["files"].([]any)[0].(map[string]any)["path"] = "../../../../../../.." + escape
		})},
		{"not an archive", "corrupt", bytes.Repeat([]byte("x"), 4096)},
	}
	before, err := n.c.ListSessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		_, err := n.c.ImportSession(t.Context(), bytes.NewReader(c.body), "refused")
		var e *client.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Details["reason"] != c.reason {
			t.Fatalf("%s: %v (want 400 with reason %s)", c.name, err, c.reason)
		}
	}
	after, err := n.c.ListSessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("%d sessions before the refused imports, %d after", len(before), len(after))
	}
	if _, err := os.Stat(escape); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was written outside the workspace: %v", err)
	}
}

// tamper flips one byte of the settings member (its size stays), which the index's SHA-256 catches.
func tamper(arch []byte) []byte {
	out := bytes.Clone(arch)
	i := bytes.Index(out, []byte(`"name":"portable"`))
	out[i+9] = 'P'
	return out
}

// resealed is arch with its manifest edited by fn, its digests recomputed as docs/export-format.md
// defines them, so only the edit itself can be refused.
func resealed(t *testing.T, arch []byte, fn func(map[string]any)) []byte {
	t.Helper()
	type member struct {
		h *tar.Header
		b []byte
	}
	var ms []member
	tr := tar.NewReader(bytes.NewReader(arch))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		ms = append(ms, member{h, b})
	}
	var m map[string]any
	if err := json.Unmarshal(ms[1].b, &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	ms[1].b, _ = json.Marshal(m)
	var idx map[string]any
	if err := json.Unmarshal(ms[0].b, &idx); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(ms[1].b)
	part := idx["parts"].([]any)[0].(map[string]any)
	part["size"], part["sha256"] = len(ms[1].b), hex.EncodeToString(s[:])
	ms[0].b, _ = json.Marshal(idx)
	sum := sha256.New()
	for _, x := range ms[:len(ms)-1] {
		var n [8]byte
		for i, size := 7, uint64(len(x.b)); i >= 0; i, size = i-1, size>>8 {
			n[i] = byte(size)
		}
		sum.Write(append(append([]byte(x.h.Name), 0), n[:]...))
		if !strings.HasPrefix(x.h.Name, "carryover/chunks/") { // a chunk is verified by its address
			sum.Write(x.b)
		}
	}
	ms[len(ms)-1].b = []byte(hex.EncodeToString(sum.Sum(nil)) + "\n")
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, x := range ms {
		x.h.Size = int64(len(x.b))
		if err := tw.WriteHeader(x.h); err != nil {
			t.Fatal(err)
		}
		tw.Write(x.b)
	}
	tw.Close()
	return out.Bytes()
}
