//go:build !race

package jobstore

// scaleJobs is the size of the sets TestApplyAtScaleReadersSeeWholeVersions
// applies (see race_test.go for the -race build).
const scaleJobs = 100_000
