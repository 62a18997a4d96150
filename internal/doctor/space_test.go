package doctor

import (
	"strings"
	"testing"
)

// TestDataDirSpace: below the minimum the level is fail, below twice it warn, with room ok; each
// warning says what a full data dir does.
func TestDataDirSpace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sp, err := DataDirSpace(dir+"/not-made-yet", 1)
	if err != nil || sp.FreeBytes <= 0 || sp.TotalBytes < sp.FreeBytes {
		t.Fatalf("space of a data dir not made yet: %+v %v", sp, err)
	}
	if sp, _ := DataDirSpace(dir, sp.FreeBytes*2); sp.Level != "fail" || !strings.Contains(sp.Warning, "checkpoints fail") {
		t.Fatalf("below the minimum: %+v", sp)
	}
	if sp, _ := DataDirSpace(dir, sp.FreeBytes*2/3); sp.Level != "warn" || !strings.Contains(sp.Warning, "checkpoints fail") {
		t.Fatalf("below twice the minimum: %+v", sp)
	}
	if sp.FreeBytes >= sp.TotalBytes/10 {
		if sp, _ := DataDirSpace(dir, 1); sp.Level != "ok" || sp.Warning != "" {
			t.Fatalf("room: %+v", sp)
		}
	}
}
