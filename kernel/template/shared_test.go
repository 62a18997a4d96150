package template

import (
	"context"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
)

// Two servers' Provisioners of one Shared fork from one template, each counting its own forks; a
// third with another pre-import set gets a template of its own. The template outlives the first
// Provisioner's Close, serves the second, and ends with the last one's.
func TestSharedTemplateOutlivesAllButItsLastProvisioner(t *testing.T) {
	t.Parallel()
	spec, err := kernel.FindSpec("python3", "")
	if err != nil {
		t.Fatal(err)
	}
	sh := NewShared()
	mk := func(preImport ...string) *Provisioner {
		tp, err := sh.New(Config{Python: spec.Argv[0], PreImport: preImport, Preload: preloadProbe, Dir: t.TempDir(),
			Local: &kernel.LocalProvisioner{SpoolRoot: t.TempDir()}, Logger: slog.Default()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tp.Close() })
		return tp
	}
	a, b, other := mk(), mk(), mk("json")
	ka := start(t, a, spec, nil)
	kb := start(t, b, spec, nil)
	fa, fb := factsOf(t, ka), factsOf(t, kb)
	if fa.PPID != a.Stats().PID || fb.PPID != fa.PPID || a.Stats().PID != b.Stats().PID {
		t.Fatalf("kernels' parents %d and %d, templates %d and %d: want one template for both", fa.PPID, fb.PPID, a.Stats().PID, b.Stats().PID)
	}
	if a.Stats().Forks != 1 || b.Stats().Forks != 1 {
		t.Errorf("forks %d and %d, want 1 each (counted per Provisioner)", a.Stats().Forks, b.Stats().Forks)
	}
	if other.sup == a.sup {
		t.Error("a Provisioner pre-importing json shares the template of those pre-importing nothing")
	}
	tpid := fa.PPID
	// As a server does: its kernels shut down, then its provisioner closed.
	ctx := context.Background()
	_ = ka.Shutdown(ctx)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	kc := start(t, b, spec, nil)
	if f := factsOf(t, kc); f.PPID != tpid {
		t.Errorf("after the first Provisioner closed, a kernel came from %d, want the shared template %d", f.PPID, tpid)
	}
	_ = kb.Shutdown(ctx)
	_ = kc.Shutdown(ctx)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(tpid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the template %d still runs after its last Provisioner closed", tpid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTemplateKeyEmptyIsNone: configs that differ only by an empty list or map against none name
// the same template; a pre-import set or an env var makes another.
func TestTemplateKeyEmptyIsNone(t *testing.T) {
	key := func(c Config) string {
		k, err := c.templateKey()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	none := key(Config{Python: "/usr/bin/python3"})
	if empty := key(Config{Python: "/usr/bin/python3", PreImport: []string{}, Env: map[string]string{}}); empty != none {
		t.Errorf("empty pre-import and env: key %s, none: %s", empty, none)
	}
	for _, c := range []Config{
		{Python: "/usr/bin/python3", PreImport: []string{"numpy"}},
		{Python: "/usr/bin/python3", Env: map[string]string{"A": "1"}},
	} {
		if key(c) == none {
			t.Errorf("%+v names the template of a bare config", c)
		}
	}
}
