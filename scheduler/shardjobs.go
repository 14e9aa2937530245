package scheduler

import (
	"slices"
	"strings"
)

// An owned shard keeps its jobs' records in a slice in unit name order,
// as the job table keeps its entries (table.byShard): a record is found by
// binary search, and the slice costs 8 bytes a job where a map cost about
// 36. Records are never taken out during a generation (a removed job's
// stays, marked, until its record is deleted; added again, it is replaced
// in place), so the order holds by construction: acquire appends the
// table's entries in their order, installJobs merges the new ones.

// find returns where the record of unit name is in sh.jobs, or would be.
func (sh *ownedShard) find(name string) (int, bool) {
	return slices.BinarySearchFunc(sh.jobs, name, func(r *jobRec, n string) int { return strings.Compare(r.e.name, n) })
}

// job returns the record of unit name, nil without one.
func (sh *ownedShard) job(name string) *jobRec {
	if i, ok := sh.find(name); ok {
		return sh.jobs[i]
	}
	return nil
}

// addJobs merges recs, in name order and none of them in sh.jobs yet,
// into sh.jobs.
func (sh *ownedShard) addJobs(recs []*jobRec) {
	if len(recs) == 0 {
		return
	}
	merged := make([]*jobRec, 0, len(sh.jobs)+len(recs))
	i := 0
	for _, r := range recs {
		for i < len(sh.jobs) && sh.jobs[i].e.name < r.e.name {
			merged = append(merged, sh.jobs[i])
			i++
		}
		merged = append(merged, r)
	}
	sh.jobs = append(merged, sh.jobs[i:]...)
}
