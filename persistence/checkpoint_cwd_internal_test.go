package persistence

import "testing"

// A saved host working dir naming the session's workspace under another data dir (a restored
// backup, a moved data dir) is mapped onto the workspace the kernel runs in now.
func TestRelocateCwd(t *testing.T) {
	t.Parallel()
	ws := "/new/data/workspaces/s1"
	for _, c := range []struct{ cwd, want string }{
		{"/old/data/workspaces/s1", ws},
		{"/old/data/workspaces/s1/sub/dir", ws + "/sub/dir"},
		{ws + "/sub", ws + "/sub"},
		{"/workspace/sub", "/workspace/sub"},                     // sandboxed: the path inside the box
		{"/old/data/workspaces/s10", "/old/data/workspaces/s10"}, // another session
		{"/tmp", "/tmp"},
		{"", ""},
	} {
		if got := relocateCwd(c.cwd, "s1", ws); got != c.want {
			t.Errorf("relocateCwd(%q) = %q, want %q", c.cwd, got, c.want)
		}
	}
}
