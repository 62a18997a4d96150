// Package chaos holds carryover's fault tests against real servers, real kernels and real disks:
// the power cut of the data dir's disk (powercut_test.go, on internal/powercut) and the chaos
// harness (`make chaos`; a short slice runs in `make test`). Everything it checks is in its tests;
// the package itself holds only their shared parts.
package chaos
