package dashboard

import "time"

// Freshness says how current a page is. A replica that cannot reach etcd
// keeps serving what it last read, marked stale with its age, rather than
// failing or hanging the request.
type Freshness struct {
	// Stale: the page is (partly) from an earlier read, not a current one.
	Stale bool
	// AsOf is when what the page shows was read (the oldest part of it).
	AsOf time.Time
	// Reason says why it is stale.
	Reason string
}

// JobsPage is one page of the jobs API.
type JobsPage struct {
	Jobs  any // the rows, encoded as the "jobs" array
	Total int // how many jobs the query selects
	// Fresh adds "stale", "as_of", "stale_for_ms" and "stale_reason"
	// beside the page; its zero value says nothing.
	Fresh Freshness
}

// addFreshness adds fr to the jobs API's answer.
func addFreshness(out map[string]any, fr Freshness, now time.Time) {
	if fr == (Freshness{}) {
		return
	}
	out["stale"] = fr.Stale
	if !fr.AsOf.IsZero() {
		out["as_of"] = fr.AsOf.UTC()
	}
	if fr.Stale {
		if !fr.AsOf.IsZero() {
			out["stale_for_ms"] = max(0, now.Sub(fr.AsOf).Milliseconds())
		}
		out["stale_reason"] = fr.Reason
	}
}
