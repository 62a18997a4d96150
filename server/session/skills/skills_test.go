package skills

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/mock"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newSkills(t *testing.T) (*Skills, *mock.Store) {
	store := mock.NewStore()
	return New(store, t.TempDir(), quiet), store
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPath(t *testing.T) {
	for in, want := range map[string]string{"a.py": "a.py", "lib/x.py": "lib/x.py", "lib//x.py": "lib/x.py"} {
		if got, err := Path(in); err != nil || got != want {
			t.Errorf("Path(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "/skills", "/skills/", "/etc/passwd", "/workspace/x", "../x", "a/../../x"} {
		if _, err := Path(bad); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("Path(%q) = %v, want invalid_request", bad, err)
		}
	}
}

func TestWriteReadDeleteThroughCache(t *testing.T) {
	ctx := context.Background()
	s, store := newSkills(t)
	f, err := s.Write(ctx, "acme", "lib/h.py", strings.NewReader("x = 1\n"))
	if err != nil || f.Path != "lib/h.py" || f.Size != 6 {
		t.Fatalf("Write = %+v, %v", f, err)
	}
	dir, err := s.Dir(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(s.dataDir, "skills-cache", hex.EncodeToString([]byte("acme"))) {
		t.Errorf("cache dir %s", dir)
	}
	if got := readFile(t, filepath.Join(dir, "lib/h.py")); got != "x = 1\n" {
		t.Errorf("cached file = %q", got)
	}
	if _, b, err := s.Read(ctx, "acme", "lib/h.py"); err != nil || string(b) != "x = 1\n" {
		t.Errorf("Read = %q, %v", b, err)
	}
	if _, _, err := s.Read(ctx, "other", "lib/h.py"); carryover.ErrorCode(err) != carryover.CodeNotFound {
		t.Errorf("another tenant reads it: %v", err)
	}
	// A file cannot be a folder's name too, nor sit under a file.
	for _, p := range []string{"lib", "lib/h.py/y"} {
		if _, err := s.Write(ctx, "acme", p, strings.NewReader("")); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("Write(%q) = %v, want invalid_request", p, err)
		}
	}
	if err := s.Delete(ctx, "acme", "lib"); carryover.ErrorCode(err) != carryover.CodeInvalid {
		t.Errorf("Delete of a folder = %v, want invalid_request", err)
	}
	if err := s.Delete(ctx, "acme", "lib/h.py"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "lib/h.py")); !os.IsNotExist(err) {
		t.Errorf("deleted skill still cached: %v", err)
	}
	if fs, _ := store.ListSkills(ctx, "acme"); len(fs) != 0 {
		t.Errorf("store still lists %v", fs)
	}
}

func TestSyncPullsAndPushes(t *testing.T) {
	ctx := context.Background()
	s, store := newSkills(t)
	dir, _ := s.Dir(ctx, "t")
	// Changed elsewhere (another node): pulled.
	if _, err := store.PutSkill(ctx, "t", "a.py", []byte("A")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx, "t", false); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "a.py")); got != "A" {
		t.Fatalf("pulled %q", got)
	}
	// Written by an "rw" session in the folder: pushed only with push.
	if err := os.WriteFile(filepath.Join(dir, "b.py"), []byte("B"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "__pycache__"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "__pycache__", "b.pyc"), []byte("c"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "a.py")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx, "t", true); err != nil {
		t.Fatal(err)
	}
	files, _ := store.ListSkills(ctx, "t")
	if len(files) != 1 || files[0].Path != "b.py" || files[0].Hash != carryover.SkillHash([]byte("B")) {
		t.Fatalf("store after push = %+v, want b.py only (a.py removed, __pycache__ not pushed)", files)
	}
}

func TestSyncRebuildsAFolderWithoutManifest(t *testing.T) {
	ctx := context.Background()
	store := mock.NewStore()
	data := t.TempDir()
	if _, err := store.PutSkill(ctx, "t", "k.py", []byte("K")); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(data, "skills-cache", hex.EncodeToString([]byte("t")), "stray.py")
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("?"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(store, data, quiet) // a new process: no manifest in memory, none on disk
	dir, err := s.Dir(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Error("an untrusted folder kept a file the store does not have")
	}
	if readFile(t, filepath.Join(dir, "k.py")) != "K" {
		t.Error("folder not rebuilt from the store")
	}
	if _, err := os.Stat(s.manifestPath("t")); err != nil {
		t.Errorf("manifest not written: %v", err)
	}
}

func TestImportLegacy(t *testing.T) {
	ctx := context.Background()
	store := mock.NewStore()
	data := t.TempDir()
	old := filepath.Join(data, "skills", hex.EncodeToString([]byte("acme")))
	if err := os.MkdirAll(filepath.Join(old, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, c := range map[string]string{"lib/new.py": "N", "same.py": "S", "diff.py": "local"} {
		if err := os.WriteFile(filepath.Join(old, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = store.PutSkill(ctx, "acme", "same.py", []byte("S"))
	_, _ = store.PutSkill(ctx, "acme", "diff.py", []byte("stored"))
	if err := New(store, data, quiet).ImportLegacy(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	files, _ := store.ListSkills(ctx, "acme")
	for _, f := range files {
		_, b, _ := store.GetSkill(ctx, "acme", f.Path)
		got[f.Path] = string(b)
	}
	want := map[string]string{"lib/new.py": "N", "same.py": "S", "diff.py": "stored", "diff.py.imported": "local"}
	if len(got) != len(want) {
		t.Fatalf("store = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "skills")); !os.IsNotExist(err) {
		t.Error("the old folder was not renamed: a restart would import again")
	}
	if _, err := os.Stat(filepath.Join(data, "skills.imported")); err != nil {
		t.Errorf("the old folder is not kept: %v", err)
	}
	if err := New(store, data, quiet).ImportLegacy(ctx); err != nil {
		t.Fatalf("a second start: %v", err)
	}
}
