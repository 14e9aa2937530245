package main

import (
	"runtime"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
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

// etcdMetricsDial is the dial options that let m count and time an etcd
// client's RPCs.
func etcdMetricsDial(m *grpcprom.ClientMetrics) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(m.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(m.StreamClientInterceptor()),
	}
}
