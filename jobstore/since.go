package jobstore

import (
	"time"

	"github.com/shardcron/shardcron/config"
)

// withSince copies next, giving each job the Since of the job of the same
// name in current, or now for a job that is new, and its Resumed: now when
// the job goes from suspended to not suspended, current's otherwise.
func withSince(current, next []config.Job, now time.Time) []config.Job {
	prev := make(map[string]*config.Job, len(current))
	for i := range current {
		prev[current[i].Name] = &current[i]
	}
	now = now.UTC().Round(0)
	out := make([]config.Job, len(next))
	for i := range next {
		out[i] = next[i]
		out[i].Since, out[i].Resumed = now, time.Time{}
		p, ok := prev[next[i].Name]
		if !ok {
			continue
		}
		if !p.Since.IsZero() {
			out[i].Since = p.Since
		}
		out[i].Resumed = p.Resumed
		if p.Suspend && !next[i].Suspend {
			out[i].Resumed = now
		}
		out[i].ItemsAdded = next[i].ItemsAddedAfter(p, now)
	}
	return out
}
