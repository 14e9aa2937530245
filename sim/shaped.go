package sim

import (
	"time"

	"github.com/shardcron/shardcron/config"
)

// shape bounds j: a window over part of the faulty stretch, a number of
// runs, or one instant instead of its schedule (a one-shot).
func shape(j *config.Job, w *world) {
	r, d := w.rng, w.cfg.Duration
	at := func(lo, hi time.Duration) time.Time {
		// In UTC, as a jobs file's RFC 3339 "Z" instant decodes.
		return w.start.Add(lo + time.Duration(r.Int64N(int64(hi-lo)))).Truncate(time.Second).UTC()
	}
	switch r.IntN(3) {
	case 0:
		j.StartAt = at(0, d/2)
		j.EndAt = j.StartAt.Add(d/4 + time.Duration(r.Int64N(int64(d))))
	case 1:
		j.MaxRuns = 3 + r.IntN(20)
	default:
		j.Schedule, j.At = "", at(5*time.Second, d/2)
	}
}
