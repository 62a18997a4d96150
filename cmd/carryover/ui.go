package main

import "github.com/carryover/carryover/web"

// The browser UI ships inside the binary (web/static via go:embed).
func init() { uiHandler = web.Handler() }
