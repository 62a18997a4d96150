// Package doctor checks the host for what carryover needs, one prerequisite per line: what was
// found, whether it passes, and when it does not, what it costs and how to fix it. `carryover
// doctor` prints the report and exits non-zero on a failure; `carryover serve` logs it at start.
//
// A FAIL is something without which the configured server cannot give what it promises (no
// sandbox when sandbox.enabled, a store it cannot reach); a WARN is a degradation the server runs
// with and says so (no idmapped mounts: boxes run as uid 0 without capabilities; no PAGEMAP_SCAN:
// the checkpoint agent hashes buffers instead of tracking dirty pages).
package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Status of one check.
type Status string

const (
	Pass Status = "PASS"
	Warn Status = "WARN"
	Fail Status = "FAIL"
	Skip Status = "SKIP" // does not apply to this configuration
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`        // what was found
	Fix    string `json:"fix,omitempty"` // what to do, when not Pass
}

// Options say what the configuration asks of the host (server/doctor.go builds them from configs).
type Options struct {
	DataDir       string
	Sandbox       bool   // sandbox.enabled
	Bwrap         string // sandbox.bwrap
	UIDBase       int    // sandbox.uid_base, the uid the idmap probe maps to
	Python        string // kernel.python
	MinFreeBytes  int64  // the data dir's filesystem; default 1 GiB
	PostgresDSN   string // store.dsn when store.driver is postgres
	S3            *S3    // chunks.s3 when a bucket is set
	SkipReachable bool   // leave out PostgreSQL and S3 (serve: opening the store checks them)
	ReachTimeout  time.Duration
	SkipPython    bool // leave out the kernel's Python (serve: the warm pool reports it)
	LazyRestore   bool // persistence.lazy_restore
}

// S3 locates the chunk bucket.
type S3 struct {
	Endpoint, Bucket, Region, AccessKey, SecretKey string
	PathStyle                                      bool
}

// Report is every check, in order.
type Report []Check

// Failed reports whether any check failed.
func (r Report) Failed() bool {
	for _, c := range r {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// Summary is one line: counts of each status and the names of what failed or warned.
func (r Report) Summary() string {
	n := map[Status]int{}
	var bad []string
	for _, c := range r {
		n[c.Status]++
		if c.Status == Fail || c.Status == Warn {
			bad = append(bad, strings.ToLower(string(c.Status))+":"+c.Name)
		}
	}
	s := fmt.Sprintf("%d passed, %d warned, %d failed, %d skipped", n[Pass], n[Warn], n[Fail], n[Skip])
	if len(bad) > 0 {
		s += " (" + strings.Join(bad, ", ") + ")"
	}
	return s
}

// Print writes the report as aligned lines, each not passing one followed by its fix.
func (r Report) Print(w io.Writer) {
	width := 0
	for _, c := range r {
		width = max(width, len(c.Name))
	}
	for _, c := range r {
		fmt.Fprintf(w, "%-4s  %-*s  %s\n", c.Status, width, c.Name, c.Detail)
		if c.Fix != "" && c.Status != Pass && c.Status != Skip {
			fmt.Fprintf(w, "      %-*s  fix: %s\n", width, "", c.Fix)
		}
	}
	fmt.Fprintln(w, r.Summary())
}

// Run runs every check that applies to o.
func Run(ctx context.Context, o Options) Report {
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
	if o.ReachTimeout == 0 {
		o.ReachTimeout = 5 * time.Second
	}
	var r Report
	r = append(r, sandboxChecks(o)...)
	r = append(r, checkDirtyPages(o), checkLazyRestore(o), checkDevShm(), checkDisk(o))
	if !o.SkipPython {
		r = append(r, checkPython(ctx, o))
	}
	if !o.SkipReachable {
		r = append(r, checkPostgres(ctx, o), checkS3(ctx, o))
	}
	return r
}
