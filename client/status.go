package client

import (
	"context"
	"net/http"
)

// NodeStatus is GET /api/status: the node's capacity, sessions, memory, warm pool, and its
// hibernations and 429s by reason (docs/capacity.md).
type NodeStatus struct {
	NodeID   string `json:"node_id,omitempty"`
	Capacity struct {
		MaxLiveKernels    int     `json:"max_live_kernels"`
		Source            string  `json:"source"`
		LiveKernels       int     `json:"live_kernels"`
		Queued            int     `json:"queued"`
		QueuedTotal       int64   `json:"queued_total"`
		QueueSeconds      float64 `json:"queue_seconds"`
		MemoryBudgetBytes int64   `json:"memory_budget_bytes"`
		KernelBytes       int64   `json:"kernel_bytes"`
	} `json:"capacity"`
	Sessions struct {
		Total      int `json:"total"`
		Live       int `json:"live"`
		Hibernated int `json:"hibernated"`
		Busy       int `json:"busy"`
	} `json:"sessions"`
	Memory struct {
		KernelBytes    int64   `json:"kernel_bytes"`
		AvailableBytes int64   `json:"available_bytes"`
		PSIFullAvg10   float64 `json:"psi_full_avg10"`
	} `json:"memory"`
	// Templates is the warm template kernels are forked from (nil: kernels are not forked here).
	Templates *struct {
		Live          int   `json:"live"`
		RSSBytes      int64 `json:"rss_bytes"`
		PSSBytes      int64 `json:"pss_bytes"`
		USSBytes      int64 `json:"uss_bytes"`
		Forks         int64 `json:"forks"`
		ColdFallbacks int64 `json:"cold_fallbacks"`
		Restarts      int64 `json:"restarts"`
		SpareBoxes    *struct {
			Ready  int   `json:"ready"`
			Want   int   `json:"want"`
			Served int64 `json:"served"`
			Missed int64 `json:"missed"`
		} `json:"spare_boxes,omitempty"`
	} `json:"templates,omitempty"`
	Pool struct {
		Idle     int   `json:"idle"`
		Starting int   `json:"starting"`
		Target   int   `json:"target"`
		Size     int   `json:"size"`
		MaxSize  int   `json:"max_size"`
		Claims   int64 `json:"claims"`
		Misses   int64 `json:"misses"`
		Grown    int64 `json:"grown"`
	} `json:"pool"`
	Evictions map[string]int64 `json:"evictions"`
	Refusals  map[string]int64 `json:"refusals"`
	// Cluster is, on a cluster node, every live node's load as this node last read it (placement
	// weighs it when this node is full).
	Cluster []ClusterNode `json:"cluster,omitempty"`
	// Disk is the room on data_dir's filesystem; Level warns ("warn", then "fail") before it is
	// full, which would fail every checkpoint.
	Disk *DiskStatus `json:"disk,omitempty"`
}

// DiskStatus is NodeStatus.Disk.
type DiskStatus struct {
	Dir        string `json:"dir"`
	FreeBytes  int64  `json:"free_bytes"`
	TotalBytes int64  `json:"total_bytes"`
	Level      string `json:"level"` // ok | warn | fail
	Warning    string `json:"warning,omitempty"`
	Error      string `json:"error,omitempty"`
}

// ClusterNode is one live node's published load.
type ClusterNode struct {
	NodeID         string `json:"node_id"`
	LiveKernels    int    `json:"live_kernels"`
	MaxLiveKernels int    `json:"max_live_kernels"`
	Queued         int    `json:"queued"`
	IdleKernels    int    `json:"idle_kernels"`
}

// Status fetches GET /api/status.
func (c *Client) Status(ctx context.Context) (*NodeStatus, error) {
	var out NodeStatus
	if err := c.Do(ctx, http.MethodGet, "/api/status", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
