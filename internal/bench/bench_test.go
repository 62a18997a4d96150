package bench

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// TestSectionsSmoke runs every section of the table in quick mode (tiny sizes, few repetitions,
// short settling waits), one subtest each (go test -run 'TestSectionsSmoke/^keys$' runs one): a
// section that no longer compiles, panics, fails its own checks (outputs lost, a gap in the events,
// a wrong answer) or prints no row is caught here, before a release measurement. The figures of a
// quick run mean nothing and are not checked; `make bench` measures.
//
// Each subtest runs its section in a process of its own (this test binary re-executed with
// sectionEnv naming the section), beside the others (as many at once as -parallel says): a
// section counts the kernels of its process (none may be left; memory per session), so two
// sections may not share one. The sections mostly wait (kernel starts, servers, settling: a serial
// run used a fifth of one core), so side by side the test takes about its longest sections, not
// their sum.
func TestSectionsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every benchmark section (minutes); make test runs it")
	}
	if name := os.Getenv(sectionEnv); name != "" {
		runSmokeSection(t, name)
		return
	}
	// Not t.Parallel: paused parallel subtests resume in no set order, and the slowest sections must
	// start first. t.Run may be called from several goroutines at once.
	var g errgroup.Group
	g.SetLimit(smokeWidth())
	for _, name := range smokeOrder() {
		g.Go(func() error {
			t.Run(name, func(t *testing.T) { runSmokeProcess(t, name) })
			return nil
		})
	}
	_ = g.Wait()
}

// smokeWidth is how many sections TestSectionsSmoke runs at once: go test's -parallel (make test
// gives 4; by default GOMAXPROCS), as for parallel tests.
func smokeWidth() int {
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			return n
		}
	}
	return runtime.GOMAXPROCS(0)
}

// sectionEnv names, in a re-executed test binary, the one section TestSectionsSmoke runs there.
const sectionEnv = "CARRYOVER_BENCH_SMOKE_SECTION"

// runSmokeProcess runs section name in this test binary re-executed (TestSectionsSmoke alone, with
// sectionEnv) and fails t with the process's output when the section failed there. The process
// gets the time left to this test (less a margin, so its own timeout's goroutine dump is seen) and
// is killed with this one.
func runSmokeProcess(t *testing.T, name string) {
	args := []string{"-test.run=^TestSectionsSmoke$", "-test.v", "-test.count=1"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+max(time.Until(d)-30*time.Second, time.Second).String())
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), sectionEnv+"="+name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the section's process failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	t.Logf("the section took %.1f s, %.1f CPU-s with the kernels it waited for", time.Since(start).Seconds(), cpuSeconds(cmd.ProcessState))
}

// cpuSeconds is the user and system CPU of an ended process and of the descendants it waited for
// (wait4 reports both): the smoke's cost in make test, per section, so the costly ones are seen.
func cpuSeconds(ps *os.ProcessState) float64 {
	if ps == nil {
		return 0
	}
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

// runSmokeSection runs section name in this process and checks its outcome.
func runSmokeSection(t *testing.T, name string) {
	var out bytes.Buffer
	results, err := Run(t.Context(), &out, Options{Quick: true, Section: name, Scratch: t.TempDir(), Log: logWriter{t}})
	t.Logf("the table:\n%s", out.String())
	switch {
	case err != nil:
		t.Fatal(err)
	case len(results) != 1 || results[0].Name != name:
		t.Fatalf("ran %+v, want the section %q alone", results, name)
	case results[0].Err != nil:
		t.Errorf("the section failed: %v", results[0].Err)
	case results[0].Rows == 0:
		t.Error("the section printed no row")
	}
	if !strings.Contains(out.String(), "== "+name+" ==") {
		t.Error("the table has no header for the section")
	}
}

// TestSectionsDistinct: every section has a name of its own (--only selects by name) and a
// function.
func TestSectionsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range sections {
		if s.Name == "" || s.Run == nil || seen[s.Name] {
			t.Errorf("section %q: empty, without a function, or named twice", s.Name)
		}
		seen[s.Name] = true
	}
}

// logWriter logs each section's time as the run goes (go test -v shows them live).
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// smokeSlowest are the sections that took longest in a quick run (a smoke run's times, slowest
// first): TestSectionsSmoke starts them first, so that none of them starts last and the test ends
// with one section going and the others' slots idle.
var smokeSlowest = []string{"capacity", "server", "wake-e2e", "portable", "templates", "cluster", "browser UI: long sessions", "agent", "durability",
	"fork fan-out", "keys", "sandbox", "jupyter front door"}

// smokeOrder is SectionNames with smokeSlowest first.
func smokeOrder() []string {
	names := append([]string(nil), smokeSlowest...)
	for _, n := range SectionNames() {
		if !slices.Contains(smokeSlowest, n) {
			names = append(names, n)
		}
	}
	return names
}

// TestSmokeOrderNamesEverySection: the smoke test's order runs every section once.
func TestSmokeOrderNamesEverySection(t *testing.T) {
	got, want := slices.Sorted(slices.Values(smokeOrder())), slices.Sorted(slices.Values(SectionNames()))
	if !slices.Equal(got, want) {
		t.Fatalf("smokeOrder() = %v, want the sections %v", got, want)
	}
}
