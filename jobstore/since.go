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
		out[i].ItemsAdded = itemsAdded(p, &next[i], now)
	}
	return out
}

// itemsAdded is config.Job.ItemsAdded of next, the job that follows prev
// (of the same name): prev's times of the items next keeps, and now for
// each item prev lacked. A job that gains items after its first version
// gains them all now.
func itemsAdded(prev, next *config.Job, now time.Time) map[string]time.Time {
	n := next.ItemCount()
	if n == 0 {
		return nil
	}
	had := make(map[string]bool, prev.ItemCount())
	for k := range prev.ItemCount() {
		had[prev.Item(k).Name] = true
	}
	var out map[string]time.Time
	for k := range n {
		name := next.Item(k).Name
		t, ok := prev.ItemsAdded[name]
		switch {
		case !had[name]:
			t, ok = now, true
		case !ok:
			continue
		}
		if out == nil {
			out = make(map[string]time.Time)
		}
		out[name] = t
	}
	return out
}
