//go:build race || racebin

package main

// Under -race, or with -tags racebin, the binary under test is built with
// the race detector, so the multi-process suites check the wiring of real
// processes for races. `make test` runs this package without -race and with
// -tags racebin: the concurrency of a process test is in the replicas it
// starts, not in the test binary that starts them and polls them (the test
// binary's own in-process tests get a -race run of their own; see the
// Makefile's PROC_INPROC_TESTS).
func init() {
	buildFlags = append(buildFlags, "-race")
	raceBuild = true
}
