package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 description of every route (openapi.json, kept by hand beside the
// handlers; openapi_test.go checks it against routes() and docs/api.md's examples).
//
//go:embed openapi.json
var openAPI []byte

// serveOpenAPI answers GET /api/openapi.json (behind the same token as the rest of /api/).
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
