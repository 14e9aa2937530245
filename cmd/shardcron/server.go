package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/config/settings"
	"github.com/shardcron/shardcron/httpauth"
	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdstatus"
	"github.com/shardcron/shardcron/internal/gcpace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/replica"
	"github.com/shardcron/shardcron/runner"
)

func newServerCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "server",
		Short: "Run one replica",
		Long: `Server runs one replica of a cluster against etcd (--etcd-endpoints), or a
single replica with its own embedded etcd (--embedded-etcd).

Every setting is a flag, an environment variable SHARDCRON_<FLAG> (upper snake
case), and a key of the --config YAML file; a flag wins over the environment,
which wins over the file, which wins over the default.

On SIGTERM the replica stops firing, hands every shard over (draining runs for
at most --drain-timeout), resigns its lease and exits 0.`,
		Args: cobra.NoArgs,
		RunE: runServer,
	}
	settings.BindNodeFlags(c.Flags())
	return c
}

func runServer(c *cobra.Command, _ []string) error {
	// Before any secret is read: exec jobs must not read this process.
	if err := notDumpable(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	node, err := settings.ResolveNode(c.Flags(), os.Getenv)
	if err != nil {
		return usageError{err}
	}
	if err := nodeFiles(c.Flags(), node); err != nil {
		return err
	}
	stderr := newLogWriter(os.Stderr, node.LogFormat)
	defer stderr.Close()
	log, err := newLogger(stderr, node.LogLevel, node.LogFormat)
	if err != nil {
		return usageError{err}
	}
	slog.SetDefault(log) // what libraries log on the default logger looks the same
	warnUnknownEnv(c.Flags(), os.Environ(), log)
	defer paceGC(c.Context())()
	httpTLS, guard, err := httpSecurity(node, log)
	if err != nil {
		return usageError{err}
	}
	var jobs []config.Job
	if node.Jobs != "" {
		if jobs, err = config.LoadJobsWith(node.Jobs, jobsOptions); err != nil {
			return err
		}
	}

	etcdSettings := node.Client().Etcd
	etcdMetrics := newEtcdClientMetrics()
	reg := newRegistry(etcdMetrics)
	// Tracing's OTEL_* settings are checked before anything starts. Its
	// flush is deferred first, so it runs last: after the replica drained
	// and its runs' spans ended.
	tr, stopTracing, err := startTracing(c.Context(), node.NodeID, reg, log, node.DrainTimeout.D())
	if err != nil {
		return usageError{err}
	}
	defer stopTracing()
	if node.EmbeddedEtcd {
		endpoint, stop, err := startEmbeddedEtcd(node, log)
		if err != nil {
			return err
		}
		defer stop()
		etcdSettings.Endpoints = []string{endpoint}
	}
	cli, err := newEtcdClient(etcdSettings, etcdClientOptions{Verbose: node.LogLevel == "debug", DialOptions: etcdMetricsDial(etcdMetrics)})
	if err != nil {
		return err
	}
	defer cli.Close()

	reg.MustRegister(etcdstatus.NewCollector(cli)) // the database's headroom before NOSPACE
	rcfg := replicaConfig(node, jobs, reg, log)
	if guard != nil {
		reg.MustRegister(guard)
		rcfg.WrapHTTP = guard.Wrap
	} else {
		rcfg.WrapHTTP = httpauth.HostCheck(node.HTTPAddr, node.OpenPaths())
	}
	if rcfg.Listener, err = listen(node.HTTPAddr, httpTLS); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	rcfg.Tracer = tr.Tracer()
	r, err := replica.New(cli, rcfg)
	if err != nil {
		rcfg.Listener.Close()
		return fmt.Errorf("server: %w", err)
	}
	if err := r.Run(c.Context()); err != nil && !errors.Is(err, c.Context().Err()) {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// replicaConfig is the replica's configuration from the node's settings,
// before its HTTP listener, guard and tracer are added.
func replicaConfig(node settings.Node, jobs []config.Job, reg *prometheus.Registry, log *slog.Logger) replica.Config {
	lc := lease.DefaultConfig()
	lc.TTL, lc.Margin = node.LeaseTTL.D(), node.LeaseMargin.D()
	var egress runner.EgressPolicy
	egress.Deny, egress.Allow = node.EgressPrefixes()
	return replica.Config{
		Cluster: node.Cluster, Node: node.NodeID, AdvertiseAddr: node.AdvertiseAddr,
		Lease: lc, Shards: node.Shards, DrainTimeout: node.DrainTimeout.D(),
		MaxConcurrentRuns: node.MaxConcurrentRuns, Jobs: jobs,
		ExecPolicy: runner.ExecPolicy{Disabled: !node.Exec, Allow: node.ExecAllow, EnvAllow: node.ExecEnvAllow},
		Egress:     egress, TraceUIURL: node.TraceUIURL,
		Version: version, Registry: reg, Logger: log,
	}
}

// startEmbeddedEtcd starts the node's own etcd (--embedded-etcd) and
// returns its endpoint and how to stop it. A single replica with its own
// etcd: several replicas each embedding one would be separate clusters,
// each firing every job, which is why server insists on one or the other,
// explicitly.
func startEmbeddedEtcd(node settings.Node, log *slog.Logger) (string, func(), error) {
	etcd, err := etcdembed.Start(etcdembed.Config{Dir: filepath.Join(node.DataDir, "etcd"), Logger: log})
	if err != nil {
		return "", nil, err
	}
	log.Info("embedded etcd listening", "endpoint", etcd.Endpoint(), "dir", node.DataDir)
	return etcd.Endpoint(), func() { etcd.Close() }, nil
}

// listen binds a replica's HTTP address, serving TLS when tlsCfg is set.
func listen(addr string, tlsCfg *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http-addr %s: %w", addr, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
}

// warnUnknownEnv names the SHARDCRON_* variables that are no setting: a
// typo there would otherwise be ignored without a word. SHARDCRON_JOB_* are
// the jobs' own variables.
func warnUnknownEnv(fs *pflag.FlagSet, environ []string, log *slog.Logger) {
	known := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { known[settings.EnvVar(f.Name)] = true })
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SHARDCRON_") && !strings.HasPrefix(name, config.JobVarPrefix) && !known[name] {
			log.Warn("environment variable is no setting; ignored", "name", name)
		}
	}
}

// paceGC keeps collections out of fire bursts until ctx ends or the
// returned stop is called (package gcpace; GOGC in the environment turns it
// off).
func paceGC(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		gcpace.Run(ctx, gcpace.DefaultHeadroom, 5*time.Second)
	}()
	return func() { cancel(); <-done }
}
