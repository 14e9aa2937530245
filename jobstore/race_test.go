//go:build race

package jobstore

// The race detector slows encoding/json about tenfold, so under -race the
// scale test applies 10,000 jobs: the same code paths (many chunks, several
// transactions, concurrent readers) in a wall time the suite can afford.
// The 100,000-job figure comes from the same test without -race.
const scaleJobs = 10_000
