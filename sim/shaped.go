package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shardcron/shardcron/config"
)

// shape bounds j: a window over part of the faulty stretch, a number of
// runs, or one instant instead of its schedule (a one-shot).
func shape(j *config.Job, w *world) {
	r, d := w.rng, w.cfg.Duration
	at := func(lo, hi time.Duration) time.Time {
		// In UTC, as a jobs file's RFC 3339 "Z" instant decodes.
		return w.start.Add(lo + time.Duration(r.Int64N(int64(hi-lo)))).Truncate(time.Second).UTC()
	}
	switch r.IntN(3) {
	case 0:
		j.StartAt = at(0, d/2)
		j.EndAt = j.StartAt.Add(d/4 + time.Duration(r.Int64N(int64(d))))
	case 1:
		j.MaxRuns = 3 + r.IntN(20)
	default:
		j.Schedule, j.At = "", at(5*time.Second, d/2)
	}
}

// jitter gives j, one time in five, a jitter of 2 s up to the gap between
// its ticks, the most a jobs file may ask (a one-shot has no gap).
func jitter(j *config.Job, r *rand.Rand) {
	gap := periodOf(j.Schedule)
	if !j.At.IsZero() || gap < 2*time.Second || r.IntN(5) != 0 {
		return
	}
	j.Jitter = config.Duration(time.Duration(2+r.IntN(int(gap/time.Second)-1)) * time.Second)
}

// startingDeadline gives j, half the time when its misfire is run_once or
// skip, a starting deadline of 1-4 s: shorter than a takeover (the TTL),
// so taken-over ticks meet it. run_all jobs keep none, for noLostTick.
func startingDeadline(j *config.Job, r *rand.Rand) {
	sd := time.Duration(1+r.IntN(4)) * time.Second
	if j.Misfire == config.MisfireRunAll || r.IntN(2) != 0 {
		return
	}
	j.StartingDeadline = config.Duration(sd)
}

var specs = []string{"* * * * * *", "*/2 * * * * *", "*/3 * * * * *", "*/5 * * * * *", "@every 4s"}

func periodOf(spec string) time.Duration {
	switch spec {
	case "*/2 * * * * *":
		return 2 * time.Second
	case "*/3 * * * * *":
		return 3 * time.Second
	case "*/5 * * * * *":
		return 5 * time.Second
	case "@every 4s":
		return 4 * time.Second
	}
	return time.Second
}

func newJobs(w *world) *jobsState {
	r := w.rng
	// Jitter draws from a stream of its own: the rest of a seed's job set
	// is drawn as it was before jitter was simulated.
	jr := rand.New(rand.NewPCG(w.seed, w.seed^0x717e7))
	dr := rand.New(rand.NewPCG(w.seed, w.seed^0xdead1)) // and starting deadlines from theirs
	js := &jobsState{w: w, meta: map[string]*jobMeta{}}
	var jobs []config.Job
	for i := range w.cfg.Jobs {
		spec := specs[r.IntN(len(specs))]
		j := config.Job{Name: fmt.Sprintf("j%d", i), Schedule: spec, Func: "sim",
			Timeout: config.Duration(30 * time.Second), Since: w.start}
		switch r.IntN(5) {
		case 0, 1:
			j.Concurrency = config.ConcurrencyAllow
		case 2, 3:
			j.Concurrency = config.ConcurrencyForbid
		default:
			j.Concurrency = config.ConcurrencyReplace
		}
		switch r.IntN(10) {
		case 0, 1:
			j.Misfire = config.MisfireRunOnce
		case 2:
			j.Misfire = config.MisfireSkip
		default:
			j.Misfire = config.MisfireRunAll
		}
		if r.IntN(8) == 0 {
			j.Retries = &config.Retries{Attempts: 2, Backoff: config.Duration(200 * time.Millisecond)}
		}
		if w.cfg.Shaped && r.IntN(6) == 0 {
			shape(&j, w)
		}
		if w.cfg.Items && r.IntN(4) == 0 {
			itemize(&j, r)
		}
		if w.cfg.Jitter {
			jitter(&j, jr)
		}
		if w.cfg.Deadlines {
			startingDeadline(&j, dr)
		}
		p := periodOf(spec)
		m := &jobMeta{minRun: p / 10, maxRun: p / 2, pFail: 0.1, strict: i < w.cfg.Jobs-2, base: j}
		if r.IntN(3) == 0 {
			m.maxRun = 2 * p // runs that outlast the period: forbid and replace act
		}
		js.meta[j.Name] = m
		jobs = append(jobs, j)
	}
	js.set = config.JobSet{Version: 1, Jobs: jobs}
	js.sets = []setAt{{w.start, js.set}}
	return js
}
