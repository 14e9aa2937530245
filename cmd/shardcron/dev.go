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

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
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
	if o.replicas < 1 || o.replicas > 64 {
		return usageError{fmt.Errorf("--replicas %d: want 1 to 64", o.replicas)}
	}
	if o.shards < 1 || o.shards > keyspace.MaxShards {
		return usageError{fmt.Errorf("--shards %d: want 1 to %d", o.shards, keyspace.MaxShards)}
	}
	addr, err := devAddr(o.httpAddr)
	if err != nil {
		return usageError{err}
	}
	o.httpAddr = addr
	lc := lease.DefaultConfig()
	lc.TTL = o.leaseTTL
	if err := lc.Validate(); err != nil {
		return usageError{fmt.Errorf("--lease-ttl: %w", err)}
	}
	if err := devFlags(o); err != nil {
		return err
	}
	var jobs []config.Job
	if o.jobsFile != "" {
		if jobs, err = config.LoadJobs(o.jobsFile); err != nil {
			return err
		}
	}
	var outMu sync.Mutex
	out := logOutput(o.logFormat)
	defer closeLogOutput()
	logFor := func(prefix string) (*slog.Logger, error) {
		return newLogger(prefixWriter{mu: &outMu, w: out, prefix: []byte(prefix)}, o.logLevel, o.logFormat)
	}
	devLog, err := logFor("[dev]   ")
	if err != nil {
		return usageError{err}
	}
	slog.SetDefault(devLog) // what libraries log on the default logger looks the same

	dir := o.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "shardcron-dev-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	etcd, err := etcdembed.Start(etcdembed.Config{Dir: filepath.Join(dir, "etcd"), Logger: devLog})
	if err != nil {
		return err
	}
	defer etcd.Close()
	devLog.Info("embedded etcd listening", "endpoint", etcd.Endpoint())

	sinkLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sinkLog, err := logFor("[sink]  ")
	if err != nil {
		return err
	}
	sinkSrv := &http.Server{Handler: newSink(sinkLog), ReadHeaderTimeout: 10 * time.Second}
	sinkDone := make(chan struct{})
	go func() { _ = sinkSrv.Serve(sinkLn); close(sinkDone) }()
	defer func() { sinkSrv.Close(); <-sinkDone }()
	sinkURL := "http://" + sinkLn.Addr().String()
	devLog.Info("sink listening", "url", sinkURL)
	env := func(name string) (string, bool) {
		if name == "SHARDCRON_JOB_SINK_URL" {
			return sinkURL, true
		}
		return os.LookupEnv(name)
	}

	etcdMetrics := newEtcdClientMetrics()
	cli, err := newEtcdClient(config.Etcd{Endpoints: []string{etcd.Endpoint()}}, etcdClientOptions{DialOptions: etcdMetricsDial(etcdMetrics)})
	if err != nil {
		return err
	}
	defer cli.Close()

	// One replica failing (its port taken, say) takes the others down too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, o.replicas)
	for i := 1; i <= o.replicas; i++ {
		node := fmt.Sprintf("dev-%d", i)
		log, err := logFor(fmt.Sprintf("[%-6s] ", node))
		if err != nil {
			return err
		}
		addr := "127.0.0.1:0"
		if i == 1 {
			addr = o.httpAddr
		}
		cfg := replicaConfig{
			Cluster: o.cluster, Node: node, HTTPAddr: addr, Lease: lc, Shards: o.shards,
			DrainTimeout: o.drainTimeout, Jobs: jobs, Logger: log, Env: env, EtcdMetrics: etcdMetrics,
			Listening: func(a string) {
				outMu.Lock()
				fmt.Fprintf(os.Stdout, "%s: http://%s/\n", node, a)
				outMu.Unlock()
			},
		}
		wg.Go(func() {
			if err := runReplica(ctx, cli, cfg); err != nil {
				errs <- fmt.Errorf("%s: %w", node, err)
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

// devAddr keeps dev on loopback: dev has no token auth, so an address
// without a host (":0") means 127.0.0.1, and any other host is refused.
func devAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		return "", fmt.Errorf("--http-addr %q: %w", addr, err)
	case host == "":
		return net.JoinHostPort("127.0.0.1", port), nil
	case !config.IsLoopback(addr):
		return "", fmt.Errorf("--http-addr %q: dev serves only on loopback (it has no token auth; run server with --http-operate-tokens-file to serve beyond it)", addr)
	}
	return addr, nil
}
