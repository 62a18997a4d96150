package kernels

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

func TestSetsImportTimeEnv(t *testing.T) {
	for env, want := range map[string]bool{"OMP_NUM_THREADS": true, "MPLBACKEND": true, "PANDAS_X": true, "HOME": false, "MY_OMP": false} {
		if got := setsImportTimeEnv(map[string]string{env: "1"}); got != want {
			t.Errorf("%s: %v", env, got)
		}
	}
	if setsImportTimeEnv(nil) {
		t.Error("nil env")
	}
}

func TestHostPath(t *testing.T) {
	for in, want := range map[string]string{"/workspace": "/ws", "/workspace/a/b": "/ws/a/b", "a/b": "/ws/a/b", "": "/ws"} {
		if got := HostPath("/ws", in); got != want {
			t.Errorf("HostPath(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Workspace("/data", "s1"); got != "/data/workspaces/s1" {
		t.Errorf("Workspace = %q", got)
	}
}

// disks is a provisioner that gives workspaces disks of their own (kernel/sandbox's, without a box).
type disks struct {
	kernel.LocalProvisioner
	made []string
}

func (d *disks) DisksEnabled() bool { return true }
func (d *disks) EnsureWorkspaceDisk(dir string, size int64) error {
	d.made = append(d.made, fmt.Sprintf("%s:%d", filepath.Base(dir), size))
	return nil
}
func (d *disks) RemoveWorkspaceDisk(string) error { return nil }

func TestCheckDisk(t *testing.T) {
	plain := New(Config{DataDir: t.TempDir()}, Deps{Log: slog.Default()})
	plain.useProvisioner(nil)
	if err := plain.CheckDisk(""); err != nil {
		t.Fatalf("no disk asked: %v", err)
	}
	if err := plain.CheckDisk("1Gi"); carryover.ErrorCode(err) != carryover.CodeInvalid {
		t.Fatalf("a disk from a server without disks: %v", err)
	}
	d := &disks{}
	f := New(Config{DataDir: t.TempDir(), MaxDisk: "2Gi"}, Deps{Log: slog.Default()})
	f.useProvisioner(d)
	for disk, ok := range map[string]bool{"1Gi": true, "2Gi": true, "3Gi": false, "1Mi": false, "big": false} {
		if err := f.CheckDisk(disk); (err == nil) != ok {
			t.Errorf("CheckDisk(%q) = %v", disk, err)
		}
	}
	if DiskSize("1Gi") != 1<<30 || DiskSize("") != 0 {
		t.Errorf("DiskSize: %d, %d", DiskSize("1Gi"), DiskSize(""))
	}
	f.MountDisk("s1", f.workspace("s1"), 1<<30)
	if len(d.made) != 1 || d.made[0] != fmt.Sprintf("s1:%d", 1<<30) {
		t.Errorf("mounted: %v", d.made)
	}
}

func TestCheckDisklessRefusesAnImageItCannotMount(t *testing.T) {
	dir := t.TempDir()
	f := New(Config{DataDir: dir}, Deps{Log: slog.Default()})
	f.useProvisioner(nil)
	if err := f.CheckDiskless("s1"); err != nil {
		t.Fatalf("no image: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "disks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "disks", "s1.img"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckDiskless("s1"); carryover.ErrorCode(err) != carryover.CodeInternal {
		t.Fatalf("an image without disks: %v", err)
	}
	if err := os.MkdirAll(f.workspace("s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveWorkspace("s1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f.workspace("s1"), filepath.Join(dir, "disks", "s1.img")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left: %v", p, err)
		}
	}
}

func TestLimitErr(t *testing.T) {
	err := LimitErr(&kernel.LimitError{Field: "memory", Message: "memory: too much"})
	if e := carryover.ErrorOf(err); e == nil || e.Code != carryover.CodeInvalid || e.Details["field"] != "sandbox.memory" {
		t.Fatalf("LimitErr = %#v", err)
	}
	other := errors.New("x")
	if LimitErr(other) != other {
		t.Fatal("another error changed")
	}
}
