package kernel

// comms.go: the comms (ipywidgets models, custom comm targets) open in a session's kernel, as a
// front door sees them go by. A comm lives in the kernel process only: no checkpoint holds it, so
// a kernel that replaces another (a wake from hibernation, a rotation, a restore after a death)
// starts with none, while the client still shows its widgets. Front doors that relay comm messages
// (the Jupyter door, the UI's relay over carryover's websocket) keep a CommSet and name what a new
// kernel lost with LostCommsText, instead of leaving widgets that silently stopped working.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Comm is one comm open in a kernel.
type Comm struct {
	ID     string `json:"comm_id"`
	Target string `json:"target_name"`
	// Model is the widget's model class (ipywidgets' state._model_name) when the comm is a widget.
	Model string `json:"model,omitempty"`
}

// CommSet is the comms open in one kernel. The zero value is ready to use.
type CommSet struct {
	mu     sync.Mutex
	kernel *Kernel
	open   map[string]Comm
}

// Observe records a comm_open or comm_close seen going either way (client to kernel on shell,
// kernel to client on iopub); other messages are ignored.
func (c *CommSet) Observe(m RawMessage) {
	typ := m.Type()
	if typ != "comm_open" && typ != "comm_close" {
		return
	}
	var content struct {
		CommID string `json:"comm_id"`
		Target string `json:"target_name"`
		Data   struct {
			State struct {
				Model string `json:"_model_name"`
			} `json:"state"`
		} `json:"data"`
	}
	if json.Unmarshal(m.Content, &content) != nil || content.CommID == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if typ == "comm_close" {
		delete(c.open, content.CommID)
		return
	}
	if c.open == nil {
		c.open = map[string]Comm{}
	}
	c.open[content.CommID] = Comm{ID: content.CommID, Target: content.Target, Model: content.Data.State.Model}
}

// Switch tells the set which kernel the comms go to from now on. When that is a new kernel
// replacing another, the comms open in the old one are lost: Switch returns them (sorted by id)
// and forgets them. The first kernel a set sees loses nothing.
func (c *CommSet) Switch(k *Kernel) []Comm {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kernel == k {
		return nil
	}
	first := c.kernel == nil
	c.kernel = k
	if first || len(c.open) == 0 {
		return nil
	}
	lost := make([]Comm, 0, len(c.open))
	for _, cm := range c.open {
		lost = append(lost, cm)
	}
	c.open = nil
	sort.Slice(lost, func(i, j int) bool { return lost[i].ID < lost[j].ID })
	return lost
}

// LostCommsText is the notice a client gets for comms a new kernel lost ("" for none).
func LostCommsText(lost []Comm) string {
	if len(lost) == 0 {
		return ""
	}
	names := make([]string, 0, len(lost))
	for _, cm := range lost {
		n := cm.Target + " " + cm.ID
		if cm.Model != "" {
			n = cm.Model + " (" + n + ")"
		}
		names = append(names, n)
	}
	return fmt.Sprintf("[carryover: the kernel was replaced (wake, rotation or restore) and restored from its last checkpoint; "+
		"comms live only in the kernel process, so these %d are gone: %s. Re-run the cells that created them.]\n",
		len(lost), strings.Join(names, ", "))
}
