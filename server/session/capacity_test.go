package session

import (
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestStatusOfAnEmptyNode: the status endpoint's figures, and the load a cluster node publishes, on a
// node with one pending session.
func TestStatusOfAnEmptyNode(t *testing.T) {
	t.Parallel()
	s, _, _ := testService(t, func(c *Config) { c.MaxLiveKernels = 3; c.QueueWait = 2 * time.Second })
	mustCreate(t, s, CreateRequest{})
	st := s.Status()
	if st.Capacity.MaxLiveKernels != 3 || st.Capacity.LiveKernels != 0 || st.Capacity.QueueSeconds != 2 || st.Sessions.Total != 1 || st.Sessions.Live != 0 {
		t.Errorf("status = %+v", st)
	}
	if l := s.Load(); l != (carryover.NodeLoad{Capacity: 3}) {
		t.Errorf("load = %+v: a pending session holds no kernel", l)
	}
}
