package shard

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the ownership figures of one node. Registered only when a
// Registerer is given.
type metrics struct {
	owned    prometheus.Gauge
	unowned  prometheus.Gauge
	members  prometheus.Gauge
	session  prometheus.Gauge
	acquired prometheus.Counter
	released prometheus.Counter
	lost     *prometheus.CounterVec
}

// newMetrics builds the metrics; ready reports what /readyz does.
func newMetrics(reg prometheus.Registerer, shards int, ready func() error) (*metrics, error) {
	m := &metrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "shardcron_shards_owned",
			Help: "Shards this node holds."}),
		unowned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "shardcron_shards_unowned",
			Help: "Shards no node holds, as this node sees them."}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{Name: "shardcron_members",
			Help: "Members counted in the assignment, as this node sees them."}),
		session: prometheus.NewGauge(prometheus.GaugeOpts{Name: "shardcron_session_up",
			Help: "1 while this node has a lease session."}),
		acquired: prometheus.NewCounter(prometheus.CounterOpts{Name: "shardcron_shard_acquisitions_total",
			Help: "Shards this node acquired (ownership churn)."}),
		released: prometheus.NewCounter(prometheus.CounterOpts{Name: "shardcron_shard_releases_total",
			Help: "Shards this node released gracefully."}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shardcron_shard_losses_total",
			Help: "Shards this node lost without releasing them, by cause (deadline: the session's safe deadline passed; fenced: a guarded write found the shard gone)."},
			[]string{"cause"}),
	}
	m.unowned.Set(float64(shards))
	if reg == nil {
		return m, nil
	}
	readyGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardcron_ready",
		Help: "1 when this node can act: its session is valid, etcd has no NOSPACE alarm and its recent writes succeed (what /readyz says); keepalives alone succeeding never count."},
		func() float64 {
			if ready() != nil {
				return 0
			}
			return 1
		})
	for _, c := range []prometheus.Collector{m.owned, m.unowned, m.members, m.session, m.acquired, m.released, m.lost, readyGauge} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("shard: register metrics: %w", err)
		}
	}
	return m, nil
}
