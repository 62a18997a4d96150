// Package clustertest holds the end-to-end tests of carryover nodes on a shared PostgreSQL: each node
// is a real process (this test binary re-executed as a node, so it can be SIGKILLed like a crashed
// server), configured only through CARRYOVER_* environment variables as a deployed node would be.
package clustertest
