//go:build race

package main

// Under -race the binary under test is built with the race detector too, so
// the multi-process suites check the wiring of real processes for races.
func init() {
	buildFlags = append(buildFlags, "-race")
	raceBuild = true
}
