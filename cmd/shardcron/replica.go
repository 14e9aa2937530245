package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/httpauth"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/runner"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// replicaConfig is what one replica needs, whether `server` runs it alone
// or `dev` runs several in one process.
type replicaConfig struct {
	Cluster           string
	Node              string
	HTTPAddr          string
	Lease             lease.Config
	Shards            int // S, used only when the cluster is created
	DrainTimeout      time.Duration
	MaxConcurrentRuns int
	// Jobs bootstraps an empty cluster's job set; otherwise a difference
	// is reported as drift.
	Jobs   []config.Job
	Logger *slog.Logger
	// Env is the environment ${SHARDCRON_JOB_*} references and exec jobs'
	// PATH and HOME come from. Nil: the process environment.
	Env func(string) (string, bool)
	// Listening is told the bound HTTP address once it serves.
	Listening func(addr string)
	// EtcdMetrics, when not nil, are the etcd client's gRPC metrics,
	// served with the replica's own.
	EtcdMetrics prometheus.Collector
	// HTTPTLS, when set, serves HTTP over TLS.
	HTTPTLS *tls.Config
	// HTTPGuard, when set, guards every HTTP request with token auth; its
	// metric joins the replica's registry.
	HTTPGuard *httpauth.Guard
	// ExecPolicy says which exec jobs this replica runs.
	ExecPolicy runner.ExecPolicy
}

// schedulerHandler breaks the construction cycle between the shard Manager,
// which needs its Handler at New, and the scheduler, which needs the
// Manager's Store: the Manager calls the Handler only once Run starts, by
// which time the scheduler is in place.
type schedulerHandler struct{ *scheduler.Scheduler }

// runReplica runs one replica until ctx is done, then leaves the cluster
// gracefully: the member key goes first, every shard is drained and
// released, and only then do the scheduler and the HTTP server stop.
func runReplica(ctx context.Context, cli *clientv3.Client, cfg replicaConfig) error {
	// shard and scheduler add the cluster and node keys themselves; the
	// rest log through log.
	log := cfg.Logger.With("cluster", cfg.Cluster, "node", cfg.Node)
	ks := keyspace.New(cfg.Cluster)

	// HTTP is served from the start, before anything asks etcd: /healthz
	// says the process is alive and never depends on etcd, so a liveness
	// probe must get its answer while etcd is still unreachable; until the
	// replica is wired, every other path answers 503 (not ready).
	listener, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http-addr %s: %w", cfg.HTTPAddr, err)
	}
	addr := listener.Addr().String()
	if cfg.HTTPTLS != nil {
		listener = tls.NewListener(listener, cfg.HTTPTLS)
	}
	var handler swapHandler
	starting := &startStatus{}
	handler.Store(startingHandler(starting))
	var root http.Handler = &handler
	if cfg.HTTPGuard != nil {
		root = cfg.HTTPGuard.Wrap(root)
	}
	// Requests (the event stream above all) end when the server stops.
	baseCtx, endRequests := context.WithCancel(context.Background())
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return baseCtx }}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Go(func() {
		if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("http: %w", err)
		}
	})
	// Whatever way this returns, the server stops (Shutdown closes the
	// listener) and every goroutine started here is joined.
	stopHTTP := sync.OnceFunc(func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		endRequests()
		_ = srv.Shutdown(shutdownCtx)
		wg.Wait()
	})
	defer stopHTTP()
	log.Info("http serving /healthz; the rest once etcd answers", "addr", addr)

	meta, err := ensureMeta(ctx, cli, ks, cfg.Shards, log, starting)
	if err != nil {
		return err
	}
	if meta.Shards != cfg.Shards {
		log.Info("following the cluster's shard count", "shards", meta.Shards, "flag", cfg.Shards)
	}

	reg := newRegistry(cfg.EtcdMetrics)
	if cfg.HTTPGuard != nil {
		reg.MustRegister(cfg.HTTPGuard)
	}

	rcfg := runner.DefaultConfig()
	rcfg.Logger, rcfg.Registerer = log, reg
	if cfg.Env != nil {
		rcfg.Env = cfg.Env
	}
	if rcfg.Supervisor, err = runner.SupervisorArgv(); err != nil {
		return fmt.Errorf("exec supervisor: %w", err)
	}
	run, err := runner.New(rcfg)
	if err != nil {
		return err
	}
	defer run.Close()

	mcfg := shard.DefaultConfig(cfg.Cluster, cfg.Node)
	mcfg.Address, mcfg.Version = addr, version
	mcfg.Lease = cfg.Lease
	mcfg.Lease.Logger = log
	mcfg.DrainTimeout = cfg.DrainTimeout
	mcfg.Logger = cfg.Logger
	mcfg.Registerer = reg
	schedHandler := &schedulerHandler{}
	mgr, err := shard.New(cli, ks, meta, mcfg, schedHandler)
	if err != nil {
		return err
	}
	scfg := scheduler.DefaultConfig()
	scfg.Cluster, scfg.Node, scfg.Shards = cfg.Cluster, cfg.Node, meta.Shards
	scfg.MaxConcurrentRuns = cfg.MaxConcurrentRuns
	scfg.DrainTimeout = cfg.DrainTimeout
	scfg.KillGrace = rcfg.KillGrace // Drain cancels this long before its deadline
	scfg.Logger, scfg.Registerer = cfg.Logger, reg
	sched, err := scheduler.New(scfg, mgr.Store(), runner.WithExecPolicy(run, cfg.ExecPolicy))
	if err != nil {
		return err
	}
	schedHandler.Scheduler = sched

	jobSet := newJobSetMetrics(reg, cfg.Jobs)
	first := newFirstSet() // no shards before a job set (firstset.go)
	if cfg.Jobs != nil {
		applied, d, err := jobstore.Bootstrap(ctx, cli, ks, cfg.Jobs, jobstore.ApplyOptions{Logger: log})
		switch {
		case err != nil:
			return fmt.Errorf("--jobs bootstrap: %w", err)
		case applied:
			log.Info("bootstrapped the cluster's job set from --jobs", "jobs", len(cfg.Jobs))
		case !d.Empty():
			log.Warn("--jobs differs from the cluster's job set; `shardcron apply` changes it", "drift", d.String())
		}
	}

	httpHandler, err := dashboard.New(dashboard.Config{
		State:   memberLeases(cli, mgr),
		Jobs:    jobsPage(cli, ks, mgr, sched, jobSet),
		Ready:   first.ready(mgr.Ready),
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Runs:    jobRuns(cli, ks, sched, mgr.BadData()),
		Changes: changeFeed(mgr),
	})
	if err != nil {
		return err
	}
	handler.Store(httpHandler)

	// Lifetimes, innermost first: the manager stops on ctx and drains
	// through the scheduler, so the scheduler and the job watch run under
	// their own context, cancelled only after the manager has returned.
	schedCtx, stopSched := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSched()
	wg.Go(func() { errs <- sched.Run(schedCtx) })
	wg.Go(func() {
		if err := jobstore.Watch(schedCtx, cli, ks, first.follow(jobSet.follow(sched.SetJobs)),
			jobstore.WithLogger(log), jobstore.WithBadData(mgr.BadData())); err != nil {
			errs <- fmt.Errorf("job set: %w", err)
		}
	})
	log.Info("http listening", "addr", addr)
	if cfg.Listening != nil {
		cfg.Listening(addr)
	}

	mgrErr := make(chan error, 1)
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	wg.Go(func() { mgrErr <- first.run(mgrCtx, mgr.Run) })

	var failed error
	select {
	case <-ctx.Done():
		log.Info("leaving the cluster")
	case failed = <-errs:
		log.Error("replica failed; leaving the cluster", "err", failed)
		stopMgr()
	case failed = <-mgrErr:
		mgrErr <- failed
	}
	stopMgr()
	if err := <-mgrErr; err != nil && failed == nil {
		failed = err
	}
	stopSched()
	stopHTTP()
	log.Info("left the cluster")
	return failed
}

// swapHandler serves whichever handler was stored last: the starting one
// until the replica is wired, then the dashboard.
type swapHandler struct{ atomic.Pointer[http.Handler] }

func (h *swapHandler) Store(next http.Handler) { h.Pointer.Store(&next) }

func (h *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*h.Load()).ServeHTTP(w, r)
}

// startingHandler answers while the replica waits for etcd: alive, not
// ready (saying why), nothing else yet.
func startingHandler(st *startStatus) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready: starting ("+st.String()+")", http.StatusServiceUnavailable)
	})
	return mux
}

// ensureMeta reads (or, on a new cluster, creates) the cluster's meta,
// saying so while etcd does not answer rather than waiting silently. A meta
// it must refuse (shard.ErrFormat) holds it back, not ready and saying why,
// until the meta is fixed: exiting would crash-loop under a supervisor.
func ensureMeta(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, shards int, log *slog.Logger, st *startStatus) (shard.Meta, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		meta, err := shard.EnsureMeta(actx, cli, ks, shard.DefaultMeta(shards))
		cancel()
		switch {
		case err == nil:
			st.set("")
			return meta, nil
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			st.set("waiting for etcd")
			log.Warn("etcd does not answer; still trying", "endpoints", cli.Endpoints(), "err", err)
		case ctx.Err() == nil && (errors.Is(err, shard.ErrFormat) || errors.Is(err, shard.ErrNoMeta)):
			if st.set("cluster meta refused: " + err.Error()) {
				log.Error("cluster meta refused; waiting for it to be fixed", "err", err, "retry_every", metaRetry)
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

// jobRow is one line of /api/v1/jobs.
type jobRow struct {
	Name      string             `json:"name"`
	Shard     int                `json:"shard"`
	Owner     string             `json:"owner"`
	Schedule  string             `json:"schedule,omitempty"`
	Timezone  string             `json:"timezone,omitempty"`
	Token     int64              `json:"token,omitempty"`
	Next      time.Time          `json:"next_fire,omitzero"`
	Suspended bool               `json:"suspended,omitempty"`
	LastRuns  []scheduler.Entry  `json:"last_runs"`
	InFlight  []scheduler.Flight `json:"in_flight,omitempty"`
	Error     string             `json:"error,omitempty"`
}

const lastRunsShown = 5

// jobsPage serves the jobs table a page at a time. Next fire times come from
// the scheduler (every replica knows them), owners from ownership, and last
// runs are read on demand (shard.ReadRecords and shard.ReadHistory, a snapshot
// each per page), never a watch on ticks/ or runs/.
func jobsPage(cli *clientv3.Client, ks keyspace.Space, mgr *shard.Manager, sched *scheduler.Scheduler, set *jobSetMetrics) func(context.Context, dashboard.JobsQuery) (any, int, error) {
	cache := newRunsCache() // a stale page's last runs (jobsruns.go)
	return func(ctx context.Context, q dashboard.JobsQuery) (any, int, error) {
		jobs := sched.Jobs()
		if q.Search != "" || q.Shard >= 0 {
			jobs = slices.DeleteFunc(jobs, func(j scheduler.JobInfo) bool {
				return !strings.Contains(j.Name, q.Search) || (q.Shard >= 0 && j.Shard != q.Shard)
			})
		}
		sort.Slice(jobs, func(i, j int) bool { return jobs[i].Name < jobs[j].Name })
		total := len(jobs)
		jobs = jobs[min(q.Offset, total):min(q.Offset+q.Limit, total)]
		st := mgr.State()
		owners := st.ShardSet
		specs := set.jobs()
		rows := make([]jobRow, len(jobs))
		refs := make([]shard.RecordRef, len(jobs))
		for i, j := range jobs {
			rows[i] = jobRow{Name: j.Name, Shard: j.Shard, Next: j.Next, Suspended: j.Suspended, LastRuns: []scheduler.Entry{}}
			if spec := specs[j.Name]; spec != nil { // the schedule only: never a target, header or env
				rows[i].Schedule, rows[i].Timezone = spec.Schedule, spec.Timezone
			}
			if j.Shard < len(owners) {
				rows[i].Owner, rows[i].Token = owners[j.Shard].Owner, owners[j.Shard].Token
			}
			refs[i] = shard.RecordRef{Shard: j.Shard, Job: j.Name}
		}
		return cache.fill(ctx, cli, ks, rows, refs, st, mgr.BadData()), total, nil
	}
}

// changeFeed serves the Manager's ownership changes to the event stream.
func changeFeed(mgr *shard.Manager) dashboard.Feed {
	return func(seq uint64) ([]any, uint64, <-chan struct{}) {
		changes, last, next := mgr.Changes(seq)
		out := make([]any, len(changes))
		for i, c := range changes {
			out[i] = c
		}
		return out, last, next
	}
}

// memberLeases serves the state with each member's lease time left in etcd.
func memberLeases(cli *clientv3.Client, mgr *shard.Manager) func() any {
	lt := &leaseTimes{cli: cli}
	return func() any {
		st := mgr.State()
		lt.fill(&st)
		return st
	}
}
