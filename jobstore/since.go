package jobstore

import (
	"maps"
	"time"

	"github.com/shardcron/shardcron/config"
)

// withSince copies next, giving each job the Since of the job of the same
// name in current, or now for a job that is new; its Resumed: now when the
// job goes from suspended to not suspended, current's otherwise; and its
// SuspendedAt: now when it goes from not suspended to suspended (or is new
// and suspended), current's otherwise; and its Rescheduled: now when its
// schedule changes (config.Job.RescheduledAfter), current's otherwise.
// Given same (diffJobs:
// current holds next[i] with the same definition), it also reports which
// jobs it stamped exactly as current stores them: the same definition and
// stamps.
func withSince(current, next []config.Job, now time.Time, same []bool) ([]config.Job, []bool) {
	prev := make(map[string]*config.Job, len(current))
	for i := range current {
		prev[current[i].Name] = &current[i]
	}
	now = now.UTC().Round(0)
	out := make([]config.Job, len(next))
	asIs := make([]bool, len(next))
	for i := range next {
		out[i] = next[i]
		out[i].Since, out[i].Resumed, out[i].SuspendedAt, out[i].Rescheduled = now, time.Time{}, time.Time{}, time.Time{}
		if next[i].Suspend {
			out[i].SuspendedAt = now
		}
		p, ok := prev[next[i].Name]
		if !ok {
			continue
		}
		if !next[i].Suspend || p.Suspend {
			// Kept after the resume, for an owner that finds the whole
			// suspension in a gap; a suspension stored before the job
			// store stamped one stays unstamped: when it began is not known.
			out[i].SuspendedAt = p.SuspendedAt
		}
		if !p.Since.IsZero() {
			out[i].Since = p.Since
		}
		out[i].Resumed = p.Resumed
		if p.Suspend && !next[i].Suspend {
			out[i].Resumed = now
		}
		out[i].Rescheduled = next[i].RescheduledAfter(p, now)
		out[i].ItemsAdded = next[i].ItemsAddedAfter(p, now)
		asIs[i] = same != nil && same[i] && !p.Since.IsZero() && out[i].Resumed.Equal(p.Resumed) &&
			out[i].SuspendedAt.Equal(p.SuspendedAt) && out[i].Rescheduled.Equal(p.Rescheduled) &&
			maps.EqualFunc(out[i].ItemsAdded, p.ItemsAdded, time.Time.Equal)
	}
	return out, asIs
}
