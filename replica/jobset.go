package replica

import (
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/jobstore"
)

// jobSetMetrics follow the cluster's job set: its version, its size, and
// how far it is from the --jobs file the replica was started with, updated
// on every change of the set (apply), not only at boot. They also keep the
// newest set by name, for the schedules the jobs API shows.
type jobSetMetrics struct {
	version, size, drift prometheus.Gauge
	bootstrap            []config.Job // nil: no --jobs, no drift
	current              atomic.Pointer[map[string]*config.Job]
	set                  atomic.Pointer[config.JobSet] // the newest, whole
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
		m.set.Store(&set)
		m.version.Set(float64(set.Version))
		m.size.Set(float64(len(set.Jobs)))
		if m.bootstrap != nil {
			// Drift is what an apply of --jobs would change: the applied
			// set, without `shardcron suspend`, which no apply changes.
			applied := set.Jobs
			if len(set.FileSuspend) > 0 {
				applied = slices.Clone(set.Jobs)
				for i := range applied {
					if fs, ok := set.FileSuspend[applied[i].Name]; ok {
						applied[i].Suspend = fs
					}
				}
			}
			d := jobstore.DiffJobs(applied, m.bootstrap)
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

// effective returns the newest effective job set seen, and false before
// the first.
func (m *jobSetMetrics) effective() (config.JobSet, bool) {
	if p := m.set.Load(); p != nil {
		return *p, true
	}
	return config.JobSet{}, false
}
