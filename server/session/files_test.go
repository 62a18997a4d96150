package session

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover"
)

func TestWorkspaceFiles(t *testing.T) {
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "f"})
	fi, err := filesOf(t, s, "f").Write("/workspace/dir/a.txt", strings.NewReader("hello"), -1)
	if err != nil || fi.Path != "dir/a.txt" || fi.Size != 5 {
		t.Fatalf("WriteFile = %+v, %v", fi, err)
	}
	if _, err := filesOf(t, s, "f").Write("b.txt", strings.NewReader(""), -1); err != nil {
		t.Fatal(err)
	}
	list, err := filesOf(t, s, "f").List()
	if err != nil || len(list) != 2 || list[0].Path != "b.txt" || list[1].Path != "dir/a.txt" {
		t.Fatalf("ListFiles = %+v, %v", list, err)
	}
	f, info, err := filesOf(t, s, "f").Read("dir/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "hello" || info.Size() != 5 {
		t.Fatalf("ReadFile = %q", b)
	}
	if err := filesOf(t, s, "f").Delete("dir/a.txt"); err != nil {
		t.Fatal(err)
	}
	_, _, err = filesOf(t, s, "f").Read("dir/a.txt")
	wantCode(t, err, carryover.CodeNotFound)
	err = filesOf(t, s, "f").Delete("dir")
	wantCode(t, err, carryover.CodeInvalid)
	_, err = s.Files("nope")
	wantCode(t, err, carryover.CodeNotFound)
}

func TestWorkspaceFilesStayInside(t *testing.T) {
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "f"})
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A kernel may leave a symlink pointing out of its workspace: it is never followed.
	if err := os.Symlink(outside, filepath.Join(s.cfg.workspace("f"), "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(s.cfg.workspace("f"), "dirlink")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"link", "/etc/passwd", "../x", "", "/workspace"} {
		if _, _, err := filesOf(t, s, "f").Read(p); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("ReadFile(%q) = %v, want invalid_request", p, err)
		}
	}
	if _, err := filesOf(t, s, "f").Write("dirlink/planted", strings.NewReader("x"), -1); carryover.ErrorCode(err) != carryover.CodeInvalid {
		t.Errorf("WriteFile through a symlink = %v, want invalid_request", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "planted")); !os.IsNotExist(err) {
		t.Fatal("a file was written outside the workspace")
	}
	if _, err := filesOf(t, s, "f").Write("a\x00b", strings.NewReader("x"), -1); carryover.ErrorCode(err) != carryover.CodeInvalid {
		t.Errorf("WriteFile with NUL = %v", err)
	}
}

func TestFileInTheWayOfADirectory(t *testing.T) {
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "f"})
	if _, err := filesOf(t, s, "f").Write("a", strings.NewReader("x"), -1); err != nil {
		t.Fatal(err)
	}
	_, err := filesOf(t, s, "f").Write("a/b", strings.NewReader("x"), -1)
	wantCode(t, err, carryover.CodeInvalid)
	wd := "a/b"
	_, err = s.PatchContext(context.Background(), "f", ContextRequest{WorkingDir: &wd})
	wantCode(t, err, carryover.CodeInvalid)
}

// TestUploadOntoADirectory: a file written where a directory is, or to a path ending in "/", is
// refused naming the path (the first named the upload's temp file; the second wrote a file "dir"),
// and the directory and its files stay.
func TestUploadOntoADirectory(t *testing.T) {
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "f"})
	dir := filesOf(t, s, "f")
	if _, err := dir.Write("d/inner.txt", strings.NewReader("x"), -1); err != nil {
		t.Fatal(err)
	}
	_, err := dir.Write("d", strings.NewReader("y"), -1)
	if wantCode(t, err, carryover.CodeInvalid); err == nil || !strings.Contains(err.Error(), `"d" is a directory`) {
		t.Errorf("onto a directory: %v", err)
	}
	_, err = dir.Write("new/", strings.NewReader("y"), -1)
	if wantCode(t, err, carryover.CodeInvalid); err == nil || !strings.Contains(err.Error(), "names a directory") {
		t.Errorf("to a path ending in /: %v", err)
	}
	list, err := dir.List()
	if err != nil || len(list) != 1 || list[0].Path != "d/inner.txt" {
		t.Errorf("after the refused uploads: %+v, %v", list, err)
	}
}
