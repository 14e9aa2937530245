package tracing

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a sampled span is not exported (the dropped counter's label).
const (
	dropQueueFull    = "queue_full"
	dropExportFailed = "export_failed"
	dropShutdown     = "shutdown"
)

// metrics counts what became of sampled spans.
type metrics struct {
	exported prometheus.Counter
	dropped  *prometheus.CounterVec
}

// newMetrics registers the counters on reg (nil: none registered).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		exported: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "shardcron", Subsystem: "tracing", Name: "spans_exported_total",
			Help: "Spans exported to the OTLP collector.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardcron", Subsystem: "tracing", Name: "spans_dropped_total",
			Help: "Sampled spans not exported, by reason: queue_full, export_failed, shutdown.",
		}, []string{"reason"}),
	}
	for _, r := range []string{dropQueueFull, dropExportFailed, dropShutdown} {
		m.dropped.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.exported, m.dropped} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("tracing: metrics: %w", err)
		}
	}
	return m, nil
}
