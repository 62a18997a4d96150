package kernel

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConnectionFileDoesNotFollowSymlinks: a link planted where the connection file goes (a
// sandboxed kernel can write its runtime dir) is replaced, and its target is left untouched.
func TestConnectionFileDoesNotFollowSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "host-file")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "connection.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	ci := ConnectionInfo{Transport: "tcp", IP: "127.0.0.1", Key: "secret", SignatureScheme: "hmac-sha256"}
	if err := ci.write(path); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious" {
		t.Fatalf("the link's target was overwritten: %q", b)
	}
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&os.ModeSymlink != 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("connection file: %v %v", st.Mode(), err)
	}
}
