package kernel

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// TemplateStats are the figures of a provisioner that forks kernels from a warm template
// (kernel/template, or the sandbox's with its Forker): GET /api/status "templates".
type TemplateStats struct {
	Live int `json:"live"` // templates warm now
	// RSSBytes, PSSBytes and USSBytes are the warm template's memory at rest (/proc/PID/smaps_rollup;
	// USS: its private pages, what it costs beside its children; PSS: its share of the pages it
	// shares with them). 0 without a warm template.
	RSSBytes      int64          `json:"rss_bytes"`
	PSSBytes      int64          `json:"pss_bytes"`
	USSBytes      int64          `json:"uss_bytes"`
	Forks         int64          `json:"forks"`          // kernels forked from a template since start
	ColdFallbacks int64          `json:"cold_fallbacks"` // kernels started cold instead (not forkable, no template warm, a failed fork)
	Restarts      int64          `json:"restarts"`       // templates started again after one exited
	SpareBoxes    *SpareBoxStats `json:"spare_boxes,omitempty"`
}

// SpareBoxStats are the sandbox's boxes kept ready for forked kernels (pool.spare_boxes).
type SpareBoxStats struct {
	Ready  int   `json:"ready"`  // boxes ready now
	Want   int   `json:"want"`   // pool.spare_boxes
	Served int64 `json:"served"` // launches that took a ready box
	Missed int64 `json:"missed"` // launches that could have and found none ready
}

// TemplateReporter is a provisioner that may fork its kernels from a template; ok is false when it
// has none.
type TemplateReporter interface {
	TemplateStats() (st TemplateStats, ok bool)
}

// ProcMemory is pid's RSS, PSS and USS (Private_Clean + Private_Dirty) from /proc/PID/smaps_rollup.
// It walks the process's page tables (~95 ms per GiB mapped here): for a status request, not a
// sample of every kernel every second.
func ProcMemory(pid int) (rss, pss, uss int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		switch string(f[0]) {
		case "Rss:":
			rss = kb << 10
		case "Pss:":
			pss = kb << 10
		case "Private_Clean:", "Private_Dirty:":
			uss += kb << 10
		}
	}
	if rss == 0 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/smaps_rollup: no Rss", pid)
	}
	return rss, pss, uss, nil
}
