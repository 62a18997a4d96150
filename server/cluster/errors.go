package cluster

import (
	"encoding/json"
	"net/http"

	"github.com/carryover/carryover"
)

// writeError answers in the API's error shape. The status of not_owner is 421 Misdirected Request;
// other codes here are internal (the API's statusOf is the mapping for everything it answers).
func writeError(w http.ResponseWriter, err error) {
	e := carryover.ErrorOf(err)
	status := http.StatusInternalServerError
	if e.Code == carryover.CodeNotOwner {
		status = http.StatusMisdirectedRequest
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}
