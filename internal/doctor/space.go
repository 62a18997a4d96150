package doctor

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DefaultMinFreeBytes is the free space under data_dir below which the disk check fails.
const DefaultMinFreeBytes = 1 << 30

// Space is the room on data_dir's filesystem, judged: /api/status shows it and the disk check of
// `carryover doctor` reads it. A full data dir fails every checkpoint (a turn answers with
// checkpoint_error and keeps its live state), so the warning comes before: below twice MinFree,
// or below a tenth of the filesystem.
type Space struct {
	Dir        string `json:"dir"`
	FreeBytes  int64  `json:"free_bytes"`
	TotalBytes int64  `json:"total_bytes"`
	// Level is "ok", "warn" (low: it will fill) or "fail" (below the minimum free space).
	Level   string `json:"level"`
	Warning string `json:"warning,omitempty"`
}

// DataDirSpace measures data_dir's filesystem (its nearest existing parent before it is made).
func DataDirSpace(dataDir string, minFree int64) (Space, error) {
	if minFree <= 0 {
		minFree = DefaultMinFreeBytes
	}
	dir := nearestDir(dataDir)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Space{Dir: dataDir}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	s := Space{Dir: dataDir, FreeBytes: int64(st.Bavail) * int64(st.Bsize), TotalBytes: int64(st.Blocks) * int64(st.Bsize), Level: "ok"}
	switch {
	case s.FreeBytes < minFree:
		s.Level = "fail"
		s.Warning = fmt.Sprintf("%s free on data_dir's filesystem, below the %s minimum: checkpoints fail once it is full", bytesText(s.FreeBytes), bytesText(minFree))
	case s.FreeBytes < 2*minFree || s.FreeBytes < s.TotalBytes/10:
		s.Level = "warn"
		s.Warning = fmt.Sprintf("%s free on data_dir's filesystem (%d%% of %s): checkpoints fail once it is full", bytesText(s.FreeBytes),
			100*s.FreeBytes/max(s.TotalBytes, 1), bytesText(s.TotalBytes))
	}
	return s, nil
}

// nearestDir is dir or its nearest existing parent (a data dir not made yet).
func nearestDir(dir string) string {
	for dir != "/" && dir != "." {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	return dir
}
