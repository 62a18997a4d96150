// Package carryover is the domain of carryover: what a session is (its states, budget, sandbox and
// context), what is recorded about it (events, executions, tools, checkpoints), the one error type
// with its codes, and the small interfaces the session service needs from storage.
//
// It depends on nothing else in the project. Implementations live in packages named for what they
// depend on (persistence/sqlite for the embedded store, kernel/ for Jupyter kernels), the session
// service composes them (server/session), and front doors translate to and from it (server/httpapi).
// See docs/architecture.md.
package carryover
