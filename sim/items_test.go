package sim

import (
	"testing"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// tinyItems is tiny for a job of two items: each unit (j:0, j:1) runs
// every tick once.
func tinyItems(j config.Job) *History {
	j.Items = 2
	h := tiny(j)
	h.Sets[0].set.Jobs[0].Items = 2
	runs := h.Runs
	h.Runs = nil
	h.Final = map[string]scheduler.Record{}
	for _, u := range []string{"j:0", "j:1"} {
		for _, r := range runs {
			r.Job = u
			h.Runs = append(h.Runs, r)
		}
		h.Final[u] = scheduler.Record{LastClaimed: at(20)}
	}
	return h
}

// withItems appends a job set at s whose job has n items.
func withItems(h *History, s float64, n int) {
	j := h.Sets[len(h.Sets)-1].set.Jobs[0]
	prev := j
	j.Items = n
	j.ItemsAdded = j.ItemsAddedAfter(&prev, at(s)) // as the job store stamps them
	h.Sets = append(h.Sets, setAt{at(s), config.JobSet{Version: int64(len(h.Sets) + 1), Jobs: []config.Job{j}}})
}

// dropRuns removes unit's runs of the ticks in [from, to].
func dropRuns(h *History, unit string, from, to float64) {
	var keep []Run
	for _, r := range h.Runs {
		if r.Job != unit || r.Tick.Before(at(from)) || r.Tick.After(at(to)) {
			keep = append(keep, r)
		}
	}
	h.Runs = keep
}

// The checker's unit is (job, item): each item is held to every property
// on its own, and an item an edit drops is a removed job.
func TestCheckerItems(t *testing.T) {
	allowAll := config.Job{Concurrency: config.ConcurrencyAllow, Misfire: config.MisfireRunAll}
	forbidAll := config.Job{Concurrency: config.ConcurrencyForbid, Misfire: config.MisfireRunAll}
	cases := []struct {
		name string
		job  config.Job
		mod  func(h *History)
		want string // "": clean
	}{
		{"clean: the items of one tick are no repeat", allowAll, func(*History) {}, ""},
		{"one item's tick lost", allowAll, func(h *History) { dropRuns(h, "j:1", 6, 6) }, "no tick lost"},
		{"forbid: two items may overlap (they start together)", forbidAll, func(*History) {}, ""},
		{"forbid: one item overlaps itself", forbidAll, func(h *History) { h.Runs[12].End = at(8.5) }, "forbid never overlaps"},
		{"an item dropped is not held to its ticks", allowAll, func(h *History) {
			withItems(h, 7, 1)
			withItems(h, 11, 2)
			dropRuns(h, "j:1", 8, 10)
		}, ""},
		{"an item added after its job's resume owes no tick before it", allowAll, func(h *History) {
			// The resume bounds every unit of the job, one added later too.
			j := h.Sets[0].set.Jobs[0]
			j.Items = 1
			h.Sets[0].set.Jobs[0] = j
			j.Suspend = true
			h.Sets = append(h.Sets, setAt{at(3), config.JobSet{Version: 2, Jobs: []config.Job{j}}})
			j.Suspend, j.Resumed = false, at(5)
			h.Sets = append(h.Sets, setAt{at(5), config.JobSet{Version: 3, Jobs: []config.Job{j}}})
			withItems(h, 11, 2)
			dropRuns(h, "j:0", 4, 4)
			dropRuns(h, "j:1", 2, 10) // before its addition: none of these is owed, or could run
		}, ""},
		{"an item added after its job's resume owes the ticks after its addition", allowAll, func(h *History) {
			j := h.Sets[0].set.Jobs[0]
			j.Items = 1
			h.Sets[0].set.Jobs[0] = j
			j.Suspend = true
			h.Sets = append(h.Sets, setAt{at(3), config.JobSet{Version: 2, Jobs: []config.Job{j}}})
			j.Suspend, j.Resumed = false, at(5)
			h.Sets = append(h.Sets, setAt{at(5), config.JobSet{Version: 3, Jobs: []config.Job{j}}})
			withItems(h, 11, 2)
			dropRuns(h, "j:0", 4, 4)
			dropRuns(h, "j:1", 2, 10) // before its addition: none of these is owed, or could run
			dropRuns(h, "j:1", 12, 12)
		}, "no tick lost"},
		{"an item added again repeats a tick of its old life", allowAll, func(h *History) {
			withItems(h, 7, 1)
			withItems(h, 11, 2)
			dropRuns(h, "j:1", 8, 10)
			h.Runs = append(h.Runs, Run{Node: "n2", Job: "j:1", Tick: at(4), Token: 9, Attempt: 1, Start: at(11.1), End: at(11.2), Deadline: at(100)})
		}, "no unmarked repeat"},
		{"an item added again re-runs a tick of its old life, marked, though nothing failed", allowAll, func(h *History) {
			withItems(h, 7, 1)
			withItems(h, 11, 2)
			dropRuns(h, "j:1", 8, 10)
			h.Runs = append(h.Runs, Run{Node: "n2", Job: "j:1", Tick: at(4), Token: 9, Attempt: 1, Rerun: true, Start: at(11.1), End: at(11.2), Deadline: at(100), EndDeadline: at(100)})
		}, "no repeat for a quiet fault"},
		{"an item added again repeats a tick of its new life", allowAll, func(h *History) {
			withItems(h, 7, 1)
			withItems(h, 11, 2)
			dropRuns(h, "j:1", 8, 10)
			h.Runs = append(h.Runs, Run{Node: "n2", Job: "j:1", Tick: at(12), Token: 9, Attempt: 1, Start: at(13.1), End: at(13.2), Deadline: at(100)})
		}, "no unmarked repeat"},
		{"a manual run of one item once", allowAll, func(h *History) {
			h.Triggers["t1"] = trigInfo{job: "j:1", at: at(3.3)}
			h.Consumed["t1"] = "claim"
			m := Run{Node: "n1", Job: "j:1", Tick: at(3.3), Token: 5, Trigger: "t1", Attempt: 1, Start: at(3.3), End: at(3.4), Deadline: at(100)}
			h.Runs = append(h.Runs, m)
		}, ""},
		{"a manual run of another item is not this one's", allowAll, func(h *History) {
			h.Triggers["t1"] = trigInfo{job: "j:1", at: at(3.3)}
			h.Consumed["t1"] = "claim"
		}, "manual run exactly once"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := tinyItems(c.job)
			c.mod(h)
			got := props(Check(h))
			if c.want == "" && len(got) > 0 {
				t.Errorf("clean history flagged: %v\n%v", got, Check(h))
			}
			if c.want != "" && (got[c.want] == 0 || len(got) != 1) {
				t.Errorf("got %v, want only %q\n%v", got, c.want, Check(h))
			}
		})
	}
}
