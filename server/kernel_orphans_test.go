package server_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"golang.org/x/sys/unix"
)

// TestKernelsDieWithServer: a kill -9 of the server takes its (unsandboxed) kernels with it, which
// nothing else could reach (no one knows their connection files). The test process is made a
// subreaper, as systemd --user or tini would be, so an orphaned kernel's parent is this process, not
// pid 1: ipykernel's own parent poller (it exits when its parent becomes pid 1) does not fire, and
// only the parent-death signal of kernel/process.go kills it.
func TestKernelsDieWithServer(t *testing.T) {
	t.Parallel()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	srv := startBinary(t)
	c := client.New(srv.Base, testToken)
	ctx := context.Background()
	if _, err := c.CreateSession(ctx, client.CreateRequest{SessionID: "orphan"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(ctx, "orphan", client.RunRequest{Code: "import os; os.getpid()"})
	if err != nil || res.Result == nil {
		t.Fatalf("run: %v %+v", err, res)
	}
	pid, err := strconv.Atoi(*res.Result)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill9()
	deadline := time.Now().Add(15 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("kernel %d outlived the server's kill -9", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive says whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
