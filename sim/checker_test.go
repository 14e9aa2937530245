package sim

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// The checker itself: each property flags a crafted violation and passes
// the same history without it.

var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// tiny is a history of one job ticking every 2 s for 20 s, every tick run
// once, 0.5 s each, by one owner.
func tiny(j config.Job) *History {
	j.Name, j.Schedule, j.Since = "j", "*/2 * * * * *", t0
	h := &History{Seed: 7, Cfg: Config{Shards: 4, Duration: 16 * time.Second, Quiet: 8 * time.Second}, Start: t0,
		Sets:     []setAt{{t0, config.JobSet{Version: 1, Jobs: []config.Job{j}}}},
		Triggers: map[string]trigInfo{}, Consumed: map[string]string{}, Pending: map[string]bool{},
		Final: map[string]scheduler.Record{"j": {LastClaimed: at(20)}}}
	for s := 2.0; s <= 20; s += 2 {
		h.Runs = append(h.Runs, Run{Node: "n1", Job: "j", Tick: at(s), Token: 5, Attempt: 1, Start: at(s), End: at(s + 0.5), Deadline: at(100), EndDeadline: at(100)})
	}
	return h
}

func props(vs []Violation) map[string]int {
	out := map[string]int{}
	for _, v := range vs {
		out[v.Property]++
	}
	return out
}

func TestCheckerProperties(t *testing.T) {
	allowAll := config.Job{Concurrency: config.ConcurrencyAllow, Misfire: config.MisfireRunAll}
	forbidAll := config.Job{Concurrency: config.ConcurrencyForbid, Misfire: config.MisfireRunAll}
	cases := []struct {
		name string
		job  config.Job
		mod  func(h *History)
		want string // "" : clean
		also string // another property the history breaks too
	}{
		{"clean", allowAll, func(*History) {}, "", ""},
		{"lost", allowAll, func(h *History) { h.Runs = append(h.Runs[:3], h.Runs[4:]...) }, "no tick lost", ""},
		{"late, not lost", allowAll, func(h *History) {
			h.Runs = h.Runs[:8] // ticks 18 and 20 still to run: in flight, or not yet claimed
			h.Final["j"] = scheduler.Record{LastClaimed: at(18), InFlight: []scheduler.Flight{{Tick: at(18), Token: 5}}}
		}, "", ""},
		{"forbid excuses a tick due while running", forbidAll, func(h *History) {
			h.Runs[2].End = at(8.5) // tick 6 runs past tick 8
			h.Runs = append(h.Runs[:3], h.Runs[4:]...)
		}, "", ""},
		{"forbid: a retry's backoff is inside its run", forbidAll, func(h *History) {
			h.Runs[2].End = at(7.5) // tick 6: attempt 1 fails at 7.5, attempt 2 runs 8.2-8.6
			r := h.Runs[2]
			r.Attempt, r.Start, r.End = 2, at(8.2), at(8.6)
			h.Runs = append(h.Runs[:3], h.Runs[4:]...) // tick 8 skipped by forbid
			h.Runs = append(h.Runs, r)
		}, "", ""},
		{"a tick of an edit's schedule from before the edit", allowAll, func(h *History) {
			// */2 until 9.5, */3 after: 9 was never a tick when it came due.
			j := h.Sets[0].set.Jobs[0]
			j.Schedule, j.Rescheduled = "*/3 * * * * *", at(9.5)
			h.Sets = append(h.Sets, setAt{at(9.5), config.JobSet{Version: 2, Jobs: []config.Job{j}}})
			h.Runs = append(h.Runs, Run{Node: "n2", Job: "j", Tick: at(9), Token: 9, Attempt: 1, Start: at(11), End: at(11.5), Deadline: at(100), EndDeadline: at(100)})
		}, "no tick before its schedule", ""},
		{"an edit's old schedule's ticks run late", allowAll, func(h *History) {
			// 10 and 12 came due under */2 and may run late after the edit
			// to */3 at 9.5, as ticks claimed or caught up.
			j := h.Sets[0].set.Jobs[0]
			j.Schedule, j.Rescheduled = "*/3 * * * * *", at(9.5)
			h.Sets = append(h.Sets, setAt{at(9.5), config.JobSet{Version: 2, Jobs: []config.Job{j}}})
		}, "", ""},
		{"repeat", allowAll, func(h *History) {
			r := h.Runs[1]
			r.Start, r.End, r.Token, r.Node = at(10), at(11), 9, "n2"
			h.Runs = append(h.Runs, r)
		}, "no unmarked repeat", ""},
		{"marked repeat", allowAll, func(h *History) {
			r := h.Runs[1]
			r.Start, r.End, r.Token, r.Rerun = at(10), at(11), 9, true
			h.Runs = append(h.Runs, r)
			h.Faults = []Fault{{Node: "n1", From: at(4.6), To: at(6), What: "crash"}} // 100 ms after the run's end
		}, "", ""},
		{"marked repeat after a quiet fault", allowAll, func(h *History) {
			r := h.Runs[1]
			r.Start, r.End, r.Token, r.Rerun = at(10), at(11), 9, true
			h.Runs = append(h.Runs, r)
			h.Faults = []Fault{{Node: "n1", From: at(4.7), To: at(6), What: "crash"}, // 200 ms after: past the 150 ms a crash may cost
				{Node: "n2", From: at(4.2), To: at(4.3), What: "pause"}} // another node
		}, "no repeat for a quiet fault", ""},
		{"retry attempt", allowAll, func(h *History) {
			r := h.Runs[1]
			r.Start, r.End, r.Attempt = at(4.6), at(4.8), 2
			h.Runs = append(h.Runs, r)
		}, "", ""},
		{"past the deadline", allowAll, func(h *History) { h.Runs[4].Deadline = h.Runs[4].Start }, "no run past the safe deadline", ""},
		{"forbid overlaps", forbidAll, func(h *History) { h.Runs[2].End = at(8.5) }, "forbid never overlaps", ""},
		{"suspended tick", allowAll, func(h *History) {
			j := h.Sets[0].set.Jobs[0]
			j.Suspend = true
			s := config.JobSet{Version: 2, Jobs: []config.Job{j}}
			j.Suspend, j.Resumed = false, at(9)
			r := config.JobSet{Version: 3, Jobs: []config.Job{j}}
			h.Sets = append(h.Sets, setAt{at(5), s}, setAt{at(9), r})
			h.Runs = append(h.Runs[:2], h.Runs[3:]...) // tick 6: not run; tick 8 still runs
		}, "no suspended tick run", ""},
		{"manual twice", allowAll, func(h *History) {
			h.Triggers["t1"] = trigInfo{job: "j", at: at(3.3)}
			h.Consumed["t1"] = "claim"
			m := Run{Node: "n1", Job: "j", Tick: at(3.3), Token: 5, Trigger: "t1", Attempt: 1, Start: at(3.3), End: at(3.4), Deadline: at(100)}
			h.Runs = append(h.Runs, m)
			m.Tick, m.Start, m.End, m.Token = at(3.3), at(12), at(12.1), 9
			h.Runs = append(h.Runs, m)
		}, "manual run exactly once", "no unmarked repeat"},
		{"manual claimed, never run", allowAll, func(h *History) {
			h.Triggers["t1"] = trigInfo{job: "j", at: at(3.3)}
			h.Consumed["t1"] = "claim"
		}, "manual run exactly once", ""},
		{"manual never taken", allowAll, func(h *History) {
			h.Triggers["t1"] = trigInfo{job: "j", at: at(12.3)}
			h.Pending["t1"] = true
			h.Final["j"] = scheduler.Record{Token: 5, LastClaimed: at(20)}
		}, "manual run exactly once", ""},
		{"manual waiting behind its owner's older ticks", allowAll, func(h *History) {
			// The owner's last runs, in the seed's last 10 s, are of
			// another job's ticks before the request: its line is behind.
			h.Triggers["t1"] = trigInfo{job: "j", at: at(12.3)}
			h.Pending["t1"] = true
			h.Final["j"] = scheduler.Record{Token: 5, LastClaimed: at(20)}
			h.Runs = append(h.Runs, Run{Node: "n1", Job: "other", Tick: at(12), Token: 6, Attempt: 1, Start: at(20), End: at(21), Deadline: at(100), EndDeadline: at(100)})
		}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := tiny(c.job)
			c.mod(h)
			got := props(Check(h))
			if c.want == "" && len(got) > 0 {
				t.Errorf("clean history flagged: %v\n%v", got, Check(h))
			}
			delete(got, c.also)
			if c.want != "" && (got[c.want] == 0 || len(got) != 1) {
				t.Errorf("got %v, want only %q", got, c.want)
			}
		})
	}
}
