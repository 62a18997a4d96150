package main

import (
	"net/http"

	"github.com/carryover/carryover/web"
)

// The browser UI ships inside the binary (web/static via go:embed); server.web_dir serves a folder
// from disk instead, for work on the UI.
func init() {
	uiHandler = func(dir string) http.Handler {
		if dir != "" {
			return web.DirHandler(dir)
		}
		return web.Handler()
	}
}
