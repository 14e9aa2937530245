package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/config/settings"
	"github.com/shardcron/shardcron/httpauth"
	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdstatus"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/replica"
)

// devOptions are the flags of `dev`.
type devOptions struct {
	replicas     int
	jobsFile     string
	httpAddr     string
	cluster      string
	dataDir      string
	leaseTTL     time.Duration
	shards       int
	drainTimeout time.Duration
	logLevel     string
	logFormat    string
}

func newDevCmd() *cobra.Command {
	var o devOptions
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster: an embedded etcd and N replicas in one process",
		Long: `Dev starts an embedded etcd on free loopback ports and N replicas against it,
in one process, for trying shardcron out. The first replica serves the
dashboard and APIs on --http-addr (127.0.0.1:8080 unless told otherwise; :0
takes a free port), the others on free ports, all on loopback (dev has no
token auth); every bound address is printed.
A fencing-aware sink receives the example http jobs ($SHARDCRON_JOB_SINK_URL)
and logs every fire. Logs are prefixed by replica. Ctrl-C leaves gracefully.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runDev(c.Context(), o) },
	}
	fs := c.Flags()
	fs.IntVar(&o.replicas, "replicas", 3, "number of replicas")
	fs.StringVar(&o.jobsFile, "jobs", "", "jobs file applied to the fresh cluster")
	fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:8080", "first replica's dashboard and API address")
	fs.StringVar(&o.cluster, "cluster", "dev", "cluster name")
	fs.StringVar(&o.dataDir, "data-dir", "", "etcd data directory (default: a temporary one, removed on exit)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 6*time.Second, "lease TTL")
	fs.IntVar(&o.shards, "shards", 64, "shard count of the new cluster")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 5*time.Second, "bound on draining a shard's runs on release")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	return c
}

func runDev(ctx context.Context, o devOptions) error {
	if err := notDumpable(); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer paceGC(ctx)()
	lc, jobs, err := o.check()
	if err != nil {
		return err
	}
	var outMu sync.Mutex
	stderr := newLogWriter(os.Stderr, o.logFormat)
	defer stderr.Close()
	logFor := func(prefix string) (*slog.Logger, error) {
		return newLogger(prefixWriter{mu: &outMu, w: stderr, prefix: []byte(prefix)}, o.logLevel, o.logFormat)
	}
	devLog, err := logFor("[dev]   ")
	if err != nil {
		return usageError{err}
	}
	slog.SetDefault(devLog) // what libraries log on the default logger looks the same

	endpoint, stopEtcd, err := startDevEtcd(o.dataDir, devLog)
	if err != nil {
		return err
	}
	defer stopEtcd()

	sinkLog, err := logFor("[sink]  ")
	if err != nil {
		return err
	}
	sinkURL, stopSink, err := startSink(sinkLog)
	if err != nil {
		return err
	}
	defer stopSink()
	devLog.Info("sink listening", "url", sinkURL)

	etcdMetrics := newEtcdClientMetrics()
	cli, err := newEtcdClient(settings.Etcd{Endpoints: []string{endpoint}}, etcdClientOptions{DialOptions: etcdMetricsDial(etcdMetrics)})
	if err != nil {
		return err
	}
	defer cli.Close()

	var stopTracing []func() // each replica traces as its own service instance
	defer func() {
		for _, stop := range stopTracing {
			stop()
		}
	}()
	replicas, err := newDevReplicas(cli, o, func(cfg *replica.Config) error {
		log, err := logFor(fmt.Sprintf("[%-6s] ", cfg.Node))
		if err != nil {
			return err
		}
		node := cfg.Node
		cfg.Lease, cfg.Jobs, cfg.Env, cfg.Logger = lc, jobs, sinkEnv(sinkURL), log
		cfg.Registry = newRegistry(etcdMetrics)
		cfg.Registry.MustRegister(etcdstatus.NewCollector(cli))
		tr, stop, err := startTracing(ctx, node, cfg.Registry, log, o.drainTimeout)
		if err != nil {
			return usageError{err}
		}
		stopTracing = append(stopTracing, stop)
		cfg.Tracer = tr.Tracer()
		cfg.Listening = func(a string) {
			outMu.Lock()
			fmt.Fprintf(os.Stdout, "%s: http://%s/\n", node, a)
			outMu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return runAll(ctx, replicas)
}

// startDevEtcd starts dev's embedded etcd in dir (a temporary directory,
// removed by stop, when dir is ""), and returns its endpoint.
func startDevEtcd(dir string, log *slog.Logger) (endpoint string, stop func(), err error) {
	cleanup := func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "shardcron-dev-"); err != nil {
			return "", nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
	}
	etcd, err := etcdembed.Start(etcdembed.Config{Dir: filepath.Join(dir, "etcd"), Logger: log})
	if err != nil {
		cleanup()
		return "", nil, err
	}
	log.Info("embedded etcd listening", "endpoint", etcd.Endpoint())
	return etcd.Endpoint(), func() { etcd.Close(); cleanup() }, nil
}

// newDevReplicas builds the replicas of `dev`, dev-1 to dev-N, each with
// its HTTP listener (the first on --http-addr, the others on free loopback
// ports) and what set adds to its Config. On an error it closes every
// listener it opened.
func newDevReplicas(cli *clientv3.Client, o devOptions, set func(cfg *replica.Config) error) (_ []*replica.Replica, err error) {
	var listeners []net.Listener
	defer func() {
		if err != nil {
			for _, ln := range listeners {
				ln.Close()
			}
		}
	}()
	replicas := make([]*replica.Replica, o.replicas)
	for i := range replicas {
		cfg := replica.Config{Cluster: o.cluster, Node: fmt.Sprintf("dev-%d", i+1), Shards: o.shards,
			DrainTimeout: o.drainTimeout, Version: version}
		if err := set(&cfg); err != nil {
			return nil, err
		}
		addr := "127.0.0.1:0"
		if i == 0 {
			addr = o.httpAddr
		}
		// dev has no tokens: answer only loopback names (DNS rebinding).
		cfg.WrapHTTP = httpauth.HostCheck(addr, httpauth.OpenablePaths)
		if cfg.Listener, err = listen(addr, nil); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Node, err)
		}
		listeners = append(listeners, cfg.Listener)
		if replicas[i], err = replica.New(cli, cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Node, err)
		}
	}
	return replicas, nil
}

// check validates the flags of `dev` and loads its jobs file.
func (o *devOptions) check() (lease.Config, []config.Job, error) {
	lc := lease.DefaultConfig()
	if o.replicas < 1 || o.replicas > 64 {
		return lc, nil, usageError{fmt.Errorf("--replicas %d: want 1 to 64", o.replicas)}
	}
	if o.shards < 1 || o.shards > keyspace.MaxShards {
		return lc, nil, usageError{fmt.Errorf("--shards %d: want 1 to %d", o.shards, keyspace.MaxShards)}
	}
	addr, err := devAddr(o.httpAddr)
	if err != nil {
		return lc, nil, usageError{err}
	}
	o.httpAddr = addr
	lc.TTL = o.leaseTTL
	if err := lc.Validate(); err != nil {
		return lc, nil, usageError{fmt.Errorf("--lease-ttl: %w", err)}
	}
	if err := devFlags(*o); err != nil {
		return lc, nil, err
	}
	var jobs []config.Job
	if o.jobsFile != "" {
		if jobs, err = config.LoadJobsWith(o.jobsFile, jobsOptions); err != nil {
			return lc, nil, err
		}
	}
	return lc, jobs, nil
}

// runAll runs every replica until ctx ends or one of them fails, which
// takes the others down too.
func runAll(ctx context.Context, replicas []*replica.Replica) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(replicas))
	for i, r := range replicas {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				errs <- fmt.Errorf("dev-%d: %w", i+1, err)
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// startSink serves the fencing-aware sink the example http jobs post to, on
// a free loopback port, and returns its URL and the function that stops it.
func startSink(log *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: newSink(log), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{}) // closed when Serve returned
	go func() { _ = srv.Serve(ln); close(done) }()
	return "http://" + ln.Addr().String(), func() { srv.Close(); <-done }, nil
}

// sinkEnv is the process environment with $SHARDCRON_JOB_SINK_URL set to
// the sink.
func sinkEnv(sinkURL string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if name == "SHARDCRON_JOB_SINK_URL" {
			return sinkURL, true
		}
		return os.LookupEnv(name)
	}
}

// devAddr keeps dev on loopback: dev has no token auth, so an address
// without a host (":0") means 127.0.0.1, and any other host is refused.
func devAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		return "", fmt.Errorf("--http-addr %q: %w", addr, err)
	case host == "":
		return net.JoinHostPort("127.0.0.1", port), nil
	case !settings.IsLoopback(addr):
		return "", fmt.Errorf("--http-addr %q: dev serves only on loopback (it has no token auth; run server with --http-operate-tokens-file to serve beyond it)", addr)
	}
	return addr, nil
}
