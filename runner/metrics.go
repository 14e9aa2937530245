package runner

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics count what the runner's bounds cut off: output and response
// bodies beyond MaxOutputBytes and MaxResponseBytes. Named
// shardcron_runner_*; nil (no Registerer) records nothing.
type metrics struct {
	truncated *prometheus.CounterVec // by kind: http, exec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{truncated: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "shardcron", Subsystem: "runner", Name: "output_truncated_total",
		Help: "Runs whose captured output went past its bound and was cut, by kind: http (the response body beyond MaxResponseBytes, 64 KiB, is not read), exec (output beyond MaxOutputBytes, 64 KiB, is read and dropped, keeping the first and last halves).",
	}, []string{"kind"})}
	for _, k := range []string{"http", "exec"} {
		m.truncated.WithLabelValues(k)
	}
	if err := reg.Register(m.truncated); err != nil {
		return nil, fmt.Errorf("runner: register metrics: %w", err)
	}
	return m, nil
}

// cutIf counts one run whose output of kind was cut, if it was.
func (m *metrics) cutIf(cut bool, kind string) {
	if cut && m != nil {
		m.truncated.WithLabelValues(kind).Inc()
	}
}
