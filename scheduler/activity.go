package scheduler

import "time"

// activity is what a job has going besides its record: changes queued or
// being written, runs, ticks claimed ahead, held or in line, a catch-up's
// rest, history to hand on, manual ticks and the names of fires taken
// over. An owner keeps a jobRec for every job of its shards, and most
// jobs have none of this between their fires (a job firing yearly never
// has), so a jobRec holds it behind one pointer: allocated when something
// is added (busy), released once all of it is gone (tidy). A nil activity
// and an empty one mean the same; code reads through going and changes
// through busy, and never keeps the pointer across a call, which may
// release it.
type activity struct {
	queued  []op          // changes not yet sent
	writing *pendingWrite // the write in flight or awaiting a retry
	backoff time.Duration // before the next retry of an unknown write; 0 once one lands
	runs    []*run        // the runs going; nil when none
	// ahead holds the ticks claimed ahead and not yet started or dropped.
	ahead aheads
	// held holds due ticks that wait for this job's claims or runs.
	held    []*waitTick
	backlog *backlog // the rest of a catch-up; nil if none
	// open holds, in order, the ticks of the schedule in line that no
	// claim covers yet (open.go): no later tick is claimed before them.
	open []time.Time
	hist []Entry // history not yet handed to History
	// manual holds this generation's manual ticks (trigger.go), by Unix
	// nanoseconds; nil until the first.
	manual map[int64]*manual
	// names holds the ticks the record named for fires taken over
	// (Flight.Nominal), or the job's entry before it was added again did
	// (keepNames), by the fire's Unix nanoseconds; nil until one. It grows
	// only at takeover and at a re-add, by at most the fires pending.
	names map[int64]time.Time
}

// going returns a copy of the job's activity, a zero one if it has none:
// to read. Its slices and maps are the job's own, so what they hold may be
// changed in place; the fields themselves are changed through busy.
func (rec *jobRec) going() activity {
	if rec.act == nil {
		return activity{}
	}
	return *rec.act
}

// busy returns the job's activity to change, allocating it if the job has
// none.
func (rec *jobRec) busy() *activity {
	if rec.act == nil {
		rec.act = new(activity)
	}
	return rec.act
}

// tidy releases the job's activity once nothing is left in it. Called
// where an event has been handled for the job; releasing early or late
// changes nothing but memory, since an empty activity and none are alike.
func (rec *jobRec) tidy() {
	if a := rec.act; a != nil && a.empty() {
		rec.act = nil
	}
}

// clearQueued forgets the changes not yet sent.
func (rec *jobRec) clearQueued() {
	if rec.act != nil {
		rec.act.queued = nil
	}
}

// dropAhead forgets the tick claimed ahead at t, if any.
func (rec *jobRec) dropAhead(t time.Time) {
	if rec.act != nil {
		rec.act.ahead.drop(t)
	}
}

func (a *activity) empty() bool {
	return len(a.queued) == 0 && a.writing == nil && a.backoff == 0 && len(a.runs) == 0 &&
		len(a.ahead) == 0 && len(a.held) == 0 && a.backlog == nil && len(a.open) == 0 &&
		len(a.hist) == 0 && len(a.manual) == 0 && len(a.names) == 0
}
