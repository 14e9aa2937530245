package lease

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the renewal figures of a node's sessions. Build them once per
// node with NewMetrics and share them through Config.Metrics: every session
// the node starts reports into the same series. A nil *Metrics records
// nothing.
type Metrics struct {
	renewal  prometheus.Histogram
	failures prometheus.Counter
}

// NewMetrics registers the lease metrics with reg (nil: built, not
// registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		renewal: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "shardcron", Subsystem: "lease", Name: "renewal_duration_seconds",
			Help:    "Time from sending a lease renewal to its answer, successful or not.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "shardcron", Subsystem: "lease", Name: "renewal_failures_total",
			Help: "Lease renewals that failed (timed out, etcd unreachable, or the lease gone).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.renewal, m.failures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("lease: register metrics: %w", err)
		}
	}
	return m, nil
}

// renewed records one renewal attempt that took d.
func (m *Metrics) renewed(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.renewal.Observe(d.Seconds())
	if err != nil {
		m.failures.Inc()
	}
}
