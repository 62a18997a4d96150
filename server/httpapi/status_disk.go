package httpapi

// DiskStatus is the room on data_dir's filesystem in GET /api/status: a full data dir fails every
// checkpoint (turns answer checkpoint_error), so the status warns before (level "warn", then "fail"
// below the minimum doctor asks for). The assembly measures it (internal/doctor.DataDirSpace).
type DiskStatus struct {
	Dir        string `json:"dir"`
	FreeBytes  int64  `json:"free_bytes"`
	TotalBytes int64  `json:"total_bytes"`
	Level      string `json:"level"` // ok | warn | fail
	Warning    string `json:"warning,omitempty"`
	Error      string `json:"error,omitempty"` // the measure itself failed
}

// ShowDisk makes GET /api/status show data_dir's room, read by view at each request.
func (a *API) ShowDisk(view func() (DiskStatus, error)) { a.diskView = view }

func (a *API) disk() *DiskStatus {
	if a.diskView == nil {
		return nil
	}
	d, err := a.diskView()
	if err != nil {
		d.Level, d.Error = "fail", err.Error()
	}
	return &d
}
