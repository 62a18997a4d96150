//go:build race

package clustertest

// raceEnabled: this test binary runs under the race detector, and so do its nodes (launchNode).
const raceEnabled = true
