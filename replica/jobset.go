package replica

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
)

// jobSetMetrics follow the cluster's job set: its version, its size, and
// how far it is from the --jobs file the replica was started with, updated
// on every change of the set (apply), not only at boot. Version and size
// come from the index; drift compares the file with every part of the set
// (jobstore.EachPart), a batch of parts at a time, off the watch's
// goroutine, so a replica holding only its own shards still counts it
// whole without keeping it.
//
// lag is how long a new version took from its apply's commit (the flip,
// stamped applied_at on the applier's clock) to this replica's scheduler
// holding it: the time an edit takes to reach the owner of its job.
type jobSetMetrics struct {
	version, size, drift, lag prometheus.Gauge
	bootstrap                 []config.Job         // nil: no --jobs, no drift
	driftOf                   chan *jobstore.Index // cap 1: the newest index not counted yet
	log                       *slog.Logger
	last                      int64 // the version lag was last set for
}

func newJobSetMetrics(reg prometheus.Registerer, bootstrap []config.Job, log *slog.Logger) *jobSetMetrics {
	opts := func(name, help string) prometheus.GaugeOpts {
		return prometheus.GaugeOpts{Namespace: "shardcron", Subsystem: "jobs", Name: name, Help: help}
	}
	m := &jobSetMetrics{
		version:   prometheus.NewGauge(opts("set_version", "Version of the job set this replica runs (0 before the first).")),
		size:      prometheus.NewGauge(opts("count", "Jobs in the job set this replica runs.")),
		drift:     prometheus.NewGauge(opts("file_drift", "Jobs that differ between --jobs and the cluster's job set (added, removed or changed); 0 without --jobs. `shardcron apply` changes the set.")),
		lag:       prometheus.NewGauge(opts("set_install_lag_seconds", "Seconds from the commit of the newest job set version (its applied_at, on the applying host's clock) to this replica's scheduler holding it.")),
		bootstrap: bootstrap,
		driftOf:   make(chan *jobstore.Index, 1),
		log:       log,
	}
	reg.MustRegister(m.version, m.size, m.drift, m.lag)
	return m
}

// follow wraps the held set's consumer: every delivery also updates the
// gauges, and hands its index to the drift count (runDrift).
func (m *jobSetMetrics) follow(next func(jobstore.Held)) func(jobstore.Held) {
	return func(h jobstore.Held) {
		next(h)
		if h.Version != m.last && !h.AppliedAt.IsZero() {
			lag := time.Since(h.AppliedAt)
			m.last = h.Version
			m.lag.Set(lag.Seconds())
			m.log.Info("job set running", "version", h.Version, "applied_at", h.AppliedAt, "lag_ms", lag.Milliseconds(), "held", len(h.Jobs))
		}
		m.version.Set(float64(h.Version))
		m.size.Set(float64(h.Index.Len()))
		if m.bootstrap == nil {
			return
		}
		for { // the newest replaces one not counted yet; never blocks
			select {
			case m.driftOf <- h.Index:
				return
			default:
			}
			select {
			case <-m.driftOf:
			default:
			}
		}
	}
}

// driftRetry is how long runDrift waits after a failed count.
const driftRetry = 5 * time.Second

// runDrift counts the drift of each index follow hands over until ctx
// ends; a count etcd fails is tried again unless a newer index came.
func (m *jobSetMetrics) runDrift(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) {
	if m.bootstrap == nil {
		return
	}
	var x *jobstore.Index
	for {
		select {
		case <-ctx.Done():
			return
		case x = <-m.driftOf:
		}
		n, err := fileDrift(ctx, cli, ks, x, m.bootstrap)
		if err == nil {
			m.drift.Set(float64(n))
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(driftRetry):
		}
		select {
		case m.driftOf <- x: // again, unless a newer one is waiting
		default:
		}
	}
}

// fileDrift is what an apply of file would change in the set x indexes:
// jobs added, removed or changed, counted part by part (the applied
// definitions: `shardcron suspend`, which no apply changes, is not in
// them).
func fileDrift(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, x *jobstore.Index, file []config.Job) (int, error) {
	byPart := map[int][]config.Job{}
	for _, j := range file {
		s := keyspace.ShardOf(j.Name, x.Shards())
		byPart[s] = append(byPart[s], j)
	}
	n := 0
	err := jobstore.EachPart(ctx, cli, ks, x, func(s int, jobs []config.Job) {
		d := jobstore.DiffJobs(jobs, byPart[s])
		n += len(d.Added) + len(d.Removed) + len(d.Changed)
		delete(byPart, s)
	})
	for _, rest := range byPart { // parts the set lacks: all added
		n += len(rest)
	}
	return n, err
}
