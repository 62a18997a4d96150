package client_test

// These tests run against the real server: TestMain starts the binary (servertest.Launch: built once
// per go test run, or the one named by CARRYOVER_TEST_BIN) on a free loopback port with a temporary
// data dir, no sandbox and a warm pool of one kernel (Debian's /usr/bin/python3, the config
// default), and stops it with SIGTERM at the end. Every test makes its own sessions on that one
// server.

import (
	"fmt"
	"os"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/servertest"
)

const testToken = "testtoken"

var (
	baseURL string
	api     *client.Client
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	srv, err := servertest.Launch(servertest.Options{Token: testToken,
		Flags: []string{"--pool.size", "1"}, Env: []string{"CARRYOVER_SANDBOX_ENABLED=false"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Stop()
	baseURL = srv.Base
	api = client.New(baseURL, testToken)
	return m.Run()
}
