package scheduler

import "time"

// A run's identity is the tick it names (Shardcron-Tick, the idempotency
// key, history), and a jittered job's fire is not its tick: these name
// the fires a job has pending by the schedule that yielded them, which an
// edit, a takeover or a removal may have taken from the job's entry.

// tickOf names fire f by its tick (jobEntry.nominal); a fire none of this
// replica's schedules yielded, taken over in flight or kept when the job
// was added again, by the tick kept for it (Flight.Nominal, keepNames),
// and any other time by itself.
func (rec *jobRec) tickOf(f time.Time) time.Time {
	if n, ok := rec.e.nominal(f); ok {
		return n
	}
	if n, ok := rec.going().names[f.UnixNano()]; ok {
		return n
	}
	return f
}

// nameFire keeps the tick the record named for a fire taken over.
func (rec *jobRec) nameFire(f Flight) {
	if f.Nominal.IsZero() || f.Trigger != "" {
		return
	}
	a := rec.busy()
	if a.names == nil {
		a.names = make(map[int64]time.Time)
	}
	a.names[f.Tick.UnixNano()] = f.Nominal
}

// keepNames names, by old, the entry that yielded them, the fires the job
// has pending (claimed ahead, in line, held, in flight in its record): a
// job added again gets an entry that knows none of old's schedules, and
// would take each such fire for a tick of its own, named by its instant.
// A fire that is its tick needs no name.
func (rec *jobRec) keepNames(old *jobEntry) {
	if old.job.Jitter == 0 && old.replaced() == nil {
		return
	}
	name := func(f time.Time) {
		if n, ok := old.nominal(f); ok && !n.Equal(f) {
			a := rec.busy()
			if a.names == nil {
				a.names = make(map[int64]time.Time)
			}
			a.names[f.UnixNano()] = n
		}
	}
	a := rec.going()
	for _, t := range a.ahead {
		name(time.Unix(0, t.tick))
	}
	for _, t := range a.open {
		name(t)
	}
	for _, w := range a.held {
		if w.man == nil {
			name(w.tick)
		}
	}
	for _, f := range rec.committed.InFlight {
		if f.Trigger == "" {
			name(f.Tick)
		}
	}
}
