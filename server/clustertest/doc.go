// Package clustertest holds the end-to-end tests of carryover nodes on a shared PostgreSQL: each node
// is the real binary started through internal/servertest (so it can be SIGKILLed like a crashed
// server, paused and restarted), configured through CARRYOVER_* environment variables as a deployed
// node would be.
package clustertest
