//go:build !race

package server_test

// printMB is the size of the abuse test's big print (see sandbox_race_test.go).
const printMB = 1000
