package cluster

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/carryover/carryover"
)

// writeError answers in the API's error shape, with the status the API's one mapping gives the
// code (Options.StatusOf: httpapi.StatusOf, handed in by the assembly as the Jupyter front door gets
// it), so a code has one status whichever layer answers it.
func (n *Node) writeError(w http.ResponseWriter, err error) {
	e := carryover.ErrorOf(err)
	status := http.StatusInternalServerError
	if n.o.StatusOf != nil {
		status = n.o.StatusOf(e.Code)
	}
	if secs, ok := e.RetryAfter(); ok {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}
