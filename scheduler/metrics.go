package scheduler

import (
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the scheduler's series, all named shardcron_scheduler_*;
// built unregistered when the Config has no Registerer. None is per job:
// the label values are fixed sets (outcome, reason, kind).
type metrics struct {
	runs          *prometheus.CounterVec // by outcome (a Status other than skipped)
	skipped       *prometheus.CounterVec // by reason; skips are not runs
	reruns        prometheus.Counter
	folded        prometheus.Counter     // flights of earlier owners the journal says ended
	retries       prometheus.Counter     // attempts made again after a failed one
	claimFailures *prometheus.CounterVec // by kind: lost, stale, unknown, deadline
	lateness      prometheus.Histogram   // fire lag
	duration      prometheus.Histogram
	inFlight      prometheus.Gauge
	slotsUsed     prometheus.Gauge
	slots         prometheus.Gauge
	waiting       prometheus.Gauge // due ticks waiting for a run slot
	commits       prometheus.Histogram
	heldNoContact prometheus.Counter     // runs that waited for contact with the store
	notes         *prometheus.CounterVec // notifications, by kind and result (notify.go)
	journalWrites *prometheus.CounterVec // completion journal writes, by result
}

var secondsBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func schedOpts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: "shardcron", Subsystem: "scheduler", Name: name, Help: help}
}

func newMetrics(reg prometheus.Registerer, slots int) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts(schedOpts("runs_total",
			"Runs that ended, by outcome (succeeded, failed, timed_out, cancelled). Skipped ticks are counted by ticks_skipped_total.")),
			[]string{"outcome"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts(schedOpts("ticks_skipped_total",
			"Ticks recorded as skipped without a run, by reason (misfire, starting_deadline, forbid, replace, suspended, backlog_full, catch_up_capped).")),
			[]string{"reason"}),
		reruns: prometheus.NewCounter(prometheus.CounterOpts(schedOpts("reruns_total",
			"Interrupted ticks of an older token run again by this node."))),
		journalWrites: prometheus.NewCounterVec(prometheus.CounterOpts(schedOpts("journal_writes_total",
			"Completion journal writes, by result (ok, failed): a write carries the completions of a burst's runs ahead of their records; a failed one sends those records at once.")),
			[]string{"result"}),
		folded: prometheus.NewCounter(prometheus.CounterOpts(schedOpts("journal_folded_total",
			"Ticks in flight under an older token that this node did not run again: the completion journal says their run ended."))),
		retries: prometheus.NewCounter(prometheus.CounterOpts(schedOpts("run_retries_total",
			"Attempts of a tick made again after a failed attempt (the job's retries)."))),
		claimFailures: prometheus.NewCounterVec(prometheus.CounterOpts(schedOpts("write_failures_total",
			"Fenced record writes (claims, completions) that failed, by kind (lost, stale, unknown, deadline).")),
			[]string{"kind"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "shardcron", Subsystem: "scheduler", Name: "fire_lag_seconds",
			Help:    "Time from a tick to the start of its run.",
			Buckets: secondsBuckets,
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "shardcron", Subsystem: "scheduler", Name: "run_duration_seconds",
			Help:    "Time from the start of a run to its end, for runs whose outcome was recorded.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts(schedOpts("runs_in_flight",
			"Runs executing on this node right now."))),
		slotsUsed: prometheus.NewGauge(prometheus.GaugeOpts(schedOpts("run_slots_used",
			"Run slots taken (claims awaiting their commit plus runs), against run_slots."))),
		slots: prometheus.NewGauge(prometheus.GaugeOpts(schedOpts("run_slots",
			"Run slots of this node: --max-concurrent-runs."))),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts(schedOpts("ticks_waiting",
			"Due ticks waiting for a run slot (late, not lost, until their starting deadline); at most 64 ordinary ticks per job, the rest are skipped (backlog_full)."))),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "shardcron", Subsystem: "scheduler", Name: "commit_duration_seconds",
			Help:    "Latency of one fenced commit of claims and completions (batched: one commit may carry many of both).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		heldNoContact: prometheus.NewCounter(prometheus.CounterOpts(schedOpts("ticks_held_no_contact_total",
			"Claimed ticks whose run waited because this node had not heard from etcd within the contact window (late, not lost: run once contact returns, or handed on with the shard)."))),
		notes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardcron", Name: "notifications_total",
			Help: "Job notifications (notify:) by kind (failure, recovery, skipped) and result: sent, failed (refused or unreachable, given up), dropped (not sent: the shard was lost first, its successor sends it; or nowhere to send it)."},
			[]string{"kind", "result"}),
	}
	m.slots.Set(float64(slots))
	// Every label value exists from the start, at 0, so rates and ratios
	// are defined before the first failure.
	for _, o := range []Status{StatusSucceeded, StatusFailed, StatusTimedOut, StatusCancelled} {
		m.runs.WithLabelValues(string(o))
	}
	for _, r := range []string{"misfire", "starting_deadline", "forbid", "replace", "suspended", "backlog_full", "catch_up_capped"} {
		m.skipped.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "failed"} {
		m.journalWrites.WithLabelValues(r)
	}
	for _, k := range []string{"lost", "stale", "unknown", "deadline"} {
		m.claimFailures.WithLabelValues(k)
	}
	for _, k := range []string{"failure", "recovery", "skipped"} {
		for _, r := range []string{NoteSent, NoteFailed, NoteDropped} {
			m.notes.WithLabelValues(k, r)
		}
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.runs, m.skipped, m.reruns, m.folded, m.retries, m.claimFailures, m.lateness,
		m.duration, m.inFlight, m.slotsUsed, m.slots, m.waiting, m.commits, m.heldNoContact, m.notes, m.journalWrites} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// started records a run's start: its fire lag, and one more in flight.
func (m *metrics) started(lag time.Duration) {
	m.lateness.Observe(max(lag, 0).Seconds())
	m.inFlight.Inc()
}

// ended records a recorded run's outcome and duration.
func (m *metrics) ended(status Status, d time.Duration) {
	m.runs.WithLabelValues(string(status)).Inc()
	m.duration.Observe(d.Seconds())
}

// skip counts n ticks skipped, by the reason its Entry's Detail gives.
func (m *metrics) skip(e Entry) {
	m.skipped.WithLabelValues(skipReason(e.Detail)).Add(float64(max(e.Count, 1)))
}

// skipReason names the reason of a skip for its metric label, a fixed set.
func skipReason(detail string) string {
	switch {
	case strings.HasPrefix(detail, "starting deadline"):
		return "starting_deadline"
	case strings.HasPrefix(detail, "concurrency forbid"):
		return "forbid"
	case strings.HasPrefix(detail, "job suspended"):
		return "suspended"
	case strings.HasPrefix(detail, "backlog full"):
		return "backlog_full"
	case strings.HasPrefix(detail, "catch-up capped"):
		return "catch_up_capped"
	case strings.HasPrefix(detail, "replaced"):
		return "replace"
	default:
		return "misfire"
	}
}

// failureKind names a write error for the claim-failure metric and logs.
func failureKind(err error) string {
	switch {
	case errors.Is(err, ErrShardLost):
		return "lost"
	case errors.Is(err, ErrDeadline):
		return "deadline"
	case errors.Is(err, ErrStale):
		return "stale"
	default:
		return "unknown"
	}
}
