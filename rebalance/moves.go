package rebalance

// Stats describes the movement between two assignments of the same S.
type Stats struct {
	// Moved counts shards whose desired owner changed (including shards
	// that became owned or unowned).
	Moved int
	// Ideal is the least movement any assignment could achieve for this
	// membership change: for a join or leave of k members out of N
	// (counted in the larger set), k × S / N, rounded up. Zero when the
	// member sets are equal.
	Ideal int
	// BetweenStaying counts moved shards whose old and new owner are both
	// members before and after: churn that a perfect algorithm would avoid.
	BetweenStaying int
}

// Ratio is Moved / Ideal; 0 when Ideal is 0.
func (s Stats) Ratio() float64 {
	if s.Ideal == 0 {
		return 0
	}
	return float64(s.Moved) / float64(s.Ideal)
}

// Moves compares two assignments. Shards beyond the shorter of the two are
// ignored (S is fixed for a cluster).
func Moves(before, after Assignment) Stats {
	inBefore := make(map[string]bool, len(before.members))
	for _, m := range before.members {
		inBefore[m] = true
	}
	inAfter := make(map[string]bool, len(after.members))
	for _, m := range after.members {
		inAfter[m] = true
	}
	changed := 0
	for m := range inBefore {
		if !inAfter[m] {
			changed++
		}
	}
	for m := range inAfter {
		if !inBefore[m] {
			changed++
		}
	}
	var st Stats
	n := min(len(before.owner), len(after.owner))
	for s := range n {
		o, p := before.owner[s], after.owner[s]
		if o == p {
			continue
		}
		st.Moved++
		if o != "" && p != "" && inAfter[o] && inBefore[p] {
			st.BetweenStaying++
		}
	}
	if changed > 0 {
		larger := max(len(before.members), len(after.members))
		st.Ideal = (changed*n + larger - 1) / larger
	}
	return st
}
