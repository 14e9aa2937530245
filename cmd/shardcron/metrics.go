package main

import (
	"runtime"
	"sync/atomic"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/jobstore"
)

// newRegistry is one replica's metrics registry: the Go runtime, the
// process, shardcron_build_info and, when given, the etcd client's gRPC
// metrics (grpc_client_*). The packages register their own series on it.
func newRegistry(etcdMetrics prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "shardcron_build_info",
		Help:        "Always 1; the labels say which build runs (set by the Makefile through -ldflags).",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "goversion": runtime.Version()},
	})
	info.Set(1)
	reg.MustRegister(info, logDropped())
	if etcdMetrics != nil {
		reg.MustRegister(etcdMetrics)
	}
	return reg
}

// newEtcdClientMetrics counts and times the etcd client's RPCs, labelled by
// gRPC service and method (a fixed set).
func newEtcdClientMetrics() *grpcprom.ClientMetrics {
	return grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5})))
}

// jobSetMetrics follow the cluster's job set: its version, its size, and
// how far it is from the --jobs file the replica was started with, updated
// on every change of the set (apply), not only at boot.
type jobSetMetrics struct {
	version, size, drift prometheus.Gauge
	bootstrap            []config.Job // nil: no --jobs, no drift
	current              atomic.Pointer[map[string]*config.Job]
}

func newJobSetMetrics(reg prometheus.Registerer, bootstrap []config.Job) *jobSetMetrics {
	opts := func(name, help string) prometheus.GaugeOpts {
		return prometheus.GaugeOpts{Namespace: "shardcron", Subsystem: "jobs", Name: name, Help: help}
	}
	m := &jobSetMetrics{
		version:   prometheus.NewGauge(opts("set_version", "Version of the job set this replica runs (0 before the first).")),
		size:      prometheus.NewGauge(opts("count", "Jobs in the job set this replica runs.")),
		drift:     prometheus.NewGauge(opts("file_drift", "Jobs that differ between --jobs and the cluster's job set (added, removed or changed); 0 without --jobs. `shardcron apply` changes the set.")),
		bootstrap: bootstrap,
	}
	reg.MustRegister(m.version, m.size, m.drift)
	return m
}

// follow wraps the job set's consumer: every set also updates the gauges.
func (m *jobSetMetrics) follow(next func(config.JobSet)) func(config.JobSet) {
	return func(set config.JobSet) {
		next(set)
		byName := make(map[string]*config.Job, len(set.Jobs))
		for i := range set.Jobs {
			byName[set.Jobs[i].Name] = &set.Jobs[i]
		}
		m.current.Store(&byName)
		m.version.Set(float64(set.Version))
		m.size.Set(float64(len(set.Jobs)))
		if m.bootstrap != nil {
			d := jobstore.DiffJobs(set.Jobs, m.bootstrap)
			m.drift.Set(float64(len(d.Added) + len(d.Removed) + len(d.Changed)))
		}
	}
}

// jobs returns the newest job set seen (nil before the first), by name.
func (m *jobSetMetrics) jobs() map[string]*config.Job {
	if p := m.current.Load(); p != nil {
		return *p
	}
	return nil
}

// etcdMetricsDial is the dial options that let m count and time an etcd
// client's RPCs.
func etcdMetricsDial(m *grpcprom.ClientMetrics) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(m.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(m.StreamClientInterceptor()),
	}
}
