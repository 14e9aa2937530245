package shard

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcron/shardcron/lease"
)

// metrics are the ownership figures of one node, all named
// shardcron_ownership_*. Registered only when a Registerer is given.
type metrics struct {
	owned    prometheus.Gauge
	unowned  prometheus.Gauge
	members  prometheus.Gauge
	session  prometheus.Gauge
	acquired prometheus.Counter
	released prometheus.Counter
	lost     *prometheus.CounterVec
}

func ownershipOpts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: "shardcron", Subsystem: "ownership", Name: name, Help: help}
}

// newMetrics builds the metrics; ready reports what /readyz does.
func newMetrics(reg prometheus.Registerer, shards int, ready func() error) (*metrics, error) {
	m := &metrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts(ownershipOpts("shards_owned",
			"Shards this node holds."))),
		unowned: prometheus.NewGauge(prometheus.GaugeOpts(ownershipOpts("shards_unowned",
			"Shards no node holds, as this node sees them."))),
		members: prometheus.NewGauge(prometheus.GaugeOpts(ownershipOpts("members",
			"Members counted in the assignment, as this node sees them."))),
		session: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shardcron", Subsystem: "lease", Name: "session_up",
			Help: "1 while this node has a lease session."}),
		acquired: prometheus.NewCounter(prometheus.CounterOpts(ownershipOpts("acquisitions_total",
			"Shards this node acquired (ownership churn)."))),
		released: prometheus.NewCounter(prometheus.CounterOpts(ownershipOpts("releases_total",
			"Shards this node released gracefully."))),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts(ownershipOpts("losses_total",
			"Shards this node lost without releasing them, by cause (deadline: the session's safe deadline passed; fenced: a guarded write found the shard gone).")),
			[]string{"cause"}),
	}
	m.unowned.Set(float64(shards))
	for _, c := range []string{"deadline", "fenced"} {
		m.lost.WithLabelValues(c) // exists from the start, at 0
	}
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

// instrument builds the Manager's metrics, the lease's (unless the caller
// supplied them) and the scrape-time view of its holdings.
func (m *Manager) instrument(reg prometheus.Registerer) error {
	met, err := newMetrics(reg, m.meta.Shards, m.Ready)
	if err != nil {
		return err
	}
	m.met = met
	if m.cfg.Lease.Metrics == nil {
		if m.cfg.Lease.Metrics, err = lease.NewMetrics(reg); err != nil {
			return err
		}
	}
	if reg != nil {
		if err := reg.Register(holdingsCollector{m}); err != nil {
			return fmt.Errorf("shard: register metrics: %w", err)
		}
	}
	return nil
}

var (
	tokenDesc = prometheus.NewDesc("shardcron_ownership_shard_token",
		"The fencing token (generation) of each shard this node holds; exported only by the owner, so the series of a shard moves with it.",
		[]string{"shard", "owner"}, nil)
	desiredDesc = prometheus.NewDesc("shardcron_ownership_shards_desired",
		"Shards the assignment gives this node, as this node sees the members.", nil, nil)
	remainingDesc = prometheus.NewDesc("shardcron_lease_remaining_seconds",
		"Seconds left before this node's safe deadline (0 without a valid session): the margin that keeps it from acting on a lease etcd may have expired.", nil, nil)
	noSpaceDesc = prometheus.NewDesc("shardcron_etcd_nospace",
		"1 while etcd reports its NOSPACE alarm or refused a write of this node for lack of space in the last 30 s: etcd takes no writes, so no tick can be claimed.", nil, nil)
)

// holdingsCollector reads the Manager's holdings at scrape time, so the
// per-shard series appear and vanish with ownership without any call site
// having to remember them.
type holdingsCollector struct{ m *Manager }

func (c holdingsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tokenDesc
	ch <- desiredDesc
	ch <- remainingDesc
	ch <- noSpaceDesc
}

func (c holdingsCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	type held struct {
		shard int
		token int64
	}
	hs := make([]held, 0, len(m.held))
	for s, h := range m.held {
		if h.lost.Err() == nil {
			hs = append(hs, held{s, h.tok.Generation})
		}
	}
	desired := 0
	for s := range m.meta.Shards {
		if m.assign.Owner(s) == m.cfg.Node {
			desired++
		}
	}
	remaining := 0.0
	if m.sess != nil && m.sess.Valid() {
		remaining = max(0, m.sess.Remaining().Seconds())
	}
	noSpace := 0.0
	if m.alarm || (!m.noSpace.IsZero() && time.Since(m.noSpace) < writeErrorWindow) {
		noSpace = 1
	}
	m.mu.Unlock()
	for _, h := range hs {
		ch <- prometheus.MustNewConstMetric(tokenDesc, prometheus.GaugeValue, float64(h.token), strconv.Itoa(h.shard), m.cfg.Node)
	}
	ch <- prometheus.MustNewConstMetric(desiredDesc, prometheus.GaugeValue, float64(desired))
	ch <- prometheus.MustNewConstMetric(remainingDesc, prometheus.GaugeValue, remaining)
	ch <- prometheus.MustNewConstMetric(noSpaceDesc, prometheus.GaugeValue, noSpace)
}
