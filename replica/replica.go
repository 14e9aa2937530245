package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/runner"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// Replica is one replica of a cluster. Build it with New and run it with
// Run, once; doc.go states the order of its parts.
type Replica struct {
	cli     *clientv3.Client
	cfg     Config
	ks      keyspace.Space
	log     *slog.Logger // with the cluster and node keys
	runner  *runner.Runner
	jobSet  *jobSetMetrics
	first   *firstSet              // no shards before a job set (firstset.go)
	cat     *catalog               // the job set's index and held jobs (catalog.go); set in Run
	runs    *runsCache             // a stale jobs page's last runs (jobscache.go)
	refused *prometheus.CounterVec // HTTP requests refused by a bound (conns.go)
	ran     atomic.Bool
}

// New checks cfg and builds the replica's parts that need no etcd (the
// runner, the job-set metrics on cfg.Registry). It starts nothing.
func New(cli *clientv3.Client, cfg Config) (*Replica, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cli == nil {
		return nil, fmt.Errorf("%w: an etcd client is required", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	// shard and scheduler add the cluster and node keys themselves; the
	// rest logs through r.log.
	log := cfg.Logger.With("cluster", cfg.Cluster, "node", cfg.Node)
	rcfg := runner.Config{Env: cfg.Env, Exec: cfg.ExecPolicy, Egress: cfg.Egress, Logger: log, Registerer: cfg.Registry, IdleConnsPerHost: cfg.MaxConcurrentRuns}
	var err error
	if rcfg.Supervisor, err = runner.SupervisorArgv(); err != nil {
		return nil, fmt.Errorf("exec supervisor: %w", err)
	}
	run, err := runner.New(rcfg)
	if err != nil {
		return nil, err
	}
	return &Replica{
		cli:     cli,
		cfg:     cfg,
		ks:      keyspace.New(cfg.Cluster),
		log:     log,
		runner:  run,
		jobSet:  newJobSetMetrics(cfg.Registry, cfg.Jobs, log),
		first:   newFirstSet(),
		runs:    newRunsCache(),
		refused: newRefusedCounter(cfg.Registry),
	}, nil
}

// Run runs the replica until ctx is done, then leaves the cluster
// gracefully: the member key goes first, every shard is drained and
// released, and only then do the scheduler and the HTTP server stop. It
// returns when every goroutine it started has ended: nil once the replica
// left after ctx ended, or the error that took it down.
func (r *Replica) Run(ctx context.Context) error {
	if !r.ran.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	defer r.runner.Close()
	// A part that fails (HTTP, the scheduler, the job watch) says so here.
	errs := make(chan error, 3)
	web := r.startHTTP(errs)
	defer web.stop()

	meta, err := r.waitMeta(ctx, web.starting)
	if err != nil {
		return err
	}
	if meta.Shards != r.cfg.Shards {
		r.log.Info("following the cluster's shard count", "shards", meta.Shards, "flag", r.cfg.Shards)
	}
	mgr, sched, err := r.build(meta, r.advertiseAddr(web.addr))
	if err != nil {
		return err
	}
	if err := r.bootstrap(ctx); err != nil {
		return err
	}
	r.cat = &catalog{cli: r.cli, ks: r.ks, shards: meta.Shards}
	handler, err := r.dashboard(mgr)
	if err != nil {
		return err
	}
	web.handler.Store(handler)
	return r.live(ctx, mgr, sched, web, errs)
}

// build makes the Manager and the scheduler of the cluster's meta. The
// scheduler writes through the Manager's Store; the Manager learns of the
// scheduler only in Run (live), so neither needs the other at birth.
func (r *Replica) build(meta shard.Meta, addr string) (*shard.Manager, *scheduler.Scheduler, error) {
	mcfg := shard.Config{
		Cluster: r.cfg.Cluster, Node: r.cfg.Node, Address: addr, Version: r.cfg.Version,
		JobSetFormat: jobstore.Format, Features: config.Features,
		Lease: r.cfg.Lease, DrainTimeout: r.cfg.DrainTimeout,
		Logger: r.cfg.Logger, Registerer: r.cfg.Registry,
	}
	mcfg.Lease.Logger = r.log
	mgr, err := shard.New(r.cli, r.ks, meta, mcfg)
	if err != nil {
		return nil, nil, err
	}
	scfg := scheduler.Config{
		Cluster: r.cfg.Cluster, Node: r.cfg.Node, Shards: meta.Shards,
		MaxConcurrentRuns: r.cfg.MaxConcurrentRuns,
		Logger:            r.cfg.Logger, Registerer: r.cfg.Registry,
		Tracer: r.cfg.Tracer,
		// Notifications go out through the runner: its HTTP client, egress
		// policy and redaction, like the runs that decide them.
		Notifier: r.runner,
		// A burst's completions are durable in the journal first, once
		// every member reads it.
		Journal: mgr.Journal(),
	}
	sched, err := scheduler.New(scfg, mgr.Store(), r.runner)
	if err != nil {
		return nil, nil, err
	}
	return mgr, sched, nil
}

// bootstrap applies Config.Jobs to a cluster without a job set, and
// reports how it differs from the cluster's otherwise.
func (r *Replica) bootstrap(ctx context.Context) error {
	if r.cfg.Jobs == nil {
		return nil
	}
	applied, d, err := jobstore.Bootstrap(ctx, r.cli, r.ks, r.cfg.Jobs, jobstore.ApplyOptions{Logger: r.log})
	switch {
	case err != nil:
		return fmt.Errorf("--jobs bootstrap: %w", err)
	case applied:
		r.log.Info("bootstrapped the cluster's job set from --jobs", "jobs", len(r.cfg.Jobs))
	case !d.Empty():
		r.log.Warn("--jobs differs from the cluster's job set; `shardcron apply` changes it", "drift", d.String())
	}
	return nil
}

// live runs the wired replica and takes it down in order (doc.go).
func (r *Replica) live(ctx context.Context, mgr *shard.Manager, sched *scheduler.Scheduler, web *web, errs chan error) error {
	// The manager stops on ctx and drains through the scheduler, so the
	// scheduler and the job watch run under their own context, cancelled
	// only after the manager has returned.
	var wg sync.WaitGroup
	schedCtx, stopSched := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSched()
	wg.Go(func() { errs <- sched.Run(schedCtx) })
	// The scheduler holds the jobs of the shards it owns or is acquiring
	// (holder.go), and every sharded job; the index lists the rest.
	want := jobstore.NewWant()
	hold := newHolder(sched, want, r.log)
	wg.Go(func() {
		expect(schedCtx, mgr, want, r.log)
		install := r.first.follow(r.jobSet.follow(r.cat.follow(installer(sched))))
		if err := jobstore.WatchHeld(schedCtx, r.cli, r.ks, r.cat.shards, want, install,
			jobstore.WithLogger(r.log), jobstore.WithBadData(mgr.BadData())); err != nil {
			errs <- fmt.Errorf("job set: %w", err)
		}
	})
	wg.Go(func() { r.jobSet.runDrift(schedCtx, r.cli, r.ks) })
	r.log.Info("http listening", "addr", web.addr)
	if r.cfg.Listening != nil {
		r.cfg.Listening(web.addr)
	}

	mgrErr := make(chan error, 1)
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	wg.Go(func() {
		mgrErr <- r.first.run(mgrCtx, func(ctx context.Context) error { return mgr.Run(ctx, hold) })
	})

	var failed error
	select {
	case <-ctx.Done():
		r.log.Info("leaving the cluster")
	case failed = <-errs:
		r.log.Error("replica failed; leaving the cluster", "err", failed)
	case failed = <-mgrErr:
		mgrErr <- failed
	}
	stopMgr()
	if err := <-mgrErr; err != nil && failed == nil {
		failed = err
	}
	stopSched()
	wg.Wait()
	web.stop()
	r.log.Info("left the cluster")
	return failed
}

// waitMeta reads (or, on a new cluster, creates) the cluster's meta,
// saying so while etcd does not answer rather than waiting silently. A meta
// it must refuse (shard.ErrFormat) holds it back, not ready and saying why
// (st), until the meta is fixed: exiting would crash-loop under a
// supervisor.
func (r *Replica) waitMeta(ctx context.Context, st *startStatus) (shard.Meta, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		meta, err := shard.EnsureMeta(actx, r.cli, r.ks, shard.DefaultMeta(r.cfg.Shards), r.log)
		cancel()
		switch {
		case err == nil:
			st.set("")
			return meta, nil
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			st.set("waiting for etcd")
			r.log.Warn("etcd does not answer; still trying", "endpoints", r.cli.Endpoints(), "err", err)
		case ctx.Err() == nil && (errors.Is(err, shard.ErrFormat) || errors.Is(err, shard.ErrNoMeta)):
			if st.set("cluster meta refused: " + err.Error()) {
				r.log.Error("cluster meta refused; waiting for it to be fixed", "err", err, "retry_every", metaRetry)
			}
			select {
			case <-ctx.Done():
			case <-time.After(metaRetry):
			}
		default:
			return meta, fmt.Errorf("cluster meta: %w", err)
		}
	}
}

// installer hands each held set to the scheduler, which keeps the held
// definitions by pointer (never changed, jobstore.Held): one copy of each
// job, not one in the watch's parts and one in the scheduler. A delivery
// that only changes which shards' jobs are held carries the Revision of
// the one before (jobstore.WatchHeld), and the scheduler installs only
// newer sets, so each set handed over carries a Revision past the last
// one's: the scheduler keys nothing else by it.
func installer(sched *scheduler.Scheduler) func(jobstore.Held) {
	var last int64
	return func(h jobstore.Held) {
		rev := max(h.Revision, last+1)
		last = rev
		sched.SetShared(scheduler.SharedSet{Version: h.Version, Revision: rev, Jobs: h.Jobs})
	}
}
