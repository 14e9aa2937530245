package scheduler

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the scheduler's few series; built unregistered when the
// Config has no Registerer.
type metrics struct {
	runs          *prometheus.CounterVec // by outcome (a Status)
	reruns        prometheus.Counter
	claimFailures *prometheus.CounterVec // by kind: lost, stale, unknown, deadline
	lateness      prometheus.Histogram
	commitLatency prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardcron", Subsystem: "scheduler", Name: "runs_total",
			Help: "Ticks that ended, by outcome (succeeded, failed, timed_out, cancelled, skipped).",
		}, []string{"outcome"}),
		reruns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "shardcron", Subsystem: "scheduler", Name: "reruns_total",
			Help: "Interrupted ticks of an older token run again by this node.",
		}),
		claimFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardcron", Subsystem: "scheduler", Name: "write_failures_total",
			Help: "Fenced record writes (claims, completions) that failed, by kind (lost, stale, unknown, deadline).",
		}, []string{"kind"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "shardcron", Subsystem: "scheduler", Name: "tick_lateness_seconds",
			Help:    "Time from a tick to the start of its run.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "shardcron", Subsystem: "scheduler", Name: "commit_duration_seconds",
			Help:    "Latency of one fenced Commit of claims and completions (the claim horizon grows with it).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.runs, m.reruns, m.claimFailures, m.lateness, m.commitLatency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
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
