//go:build race

package server_test

// printMB is the size of the abuse test's big print: the race detector slows the output path about
// fivefold, so a race build prints a quarter of the gigabyte.
const printMB = 250
