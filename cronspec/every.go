package cronspec

import "time"

// every is "@every d", anchored to the Unix epoch: it fires at the instants
// k*d after 1970-01-01T00:00:00Z, whatever the time zone, so replicas that
// compute Next from different starting points still agree on the phase.
type every struct {
	sec int64 // d in whole seconds, >= 1
	loc *time.Location
}

func (e every) Next(t time.Time) time.Time {
	k := floorDiv(t.Unix(), e.sec) + 1 // (k-1)*d <= floor(t) <= t < k*d
	return time.Unix(k*e.sec, 0).In(e.loc)
}
