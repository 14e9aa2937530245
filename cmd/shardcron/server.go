package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/lease"
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
	config.BindNodeFlags(c.Flags())
	return c
}

func runServer(c *cobra.Command, _ []string) error {
	node, err := config.ResolveNode(c.Flags(), os.Getenv)
	if err != nil {
		return usageError{err}
	}
	if err := nodeFiles(c.Flags(), node); err != nil {
		return err
	}
	log, err := newLogger(logOutput(node.LogFormat), node.LogLevel, node.LogFormat)
	if err != nil {
		return usageError{err}
	}
	defer closeLogOutput()
	slog.SetDefault(log) // what libraries log on the default logger looks the same
	warnUnknownEnv(c.Flags(), os.Environ(), log)
	httpTLS, guard, err := httpSecurity(node, log)
	if err != nil {
		return usageError{err}
	}
	var jobs []config.Job
	if node.Jobs != "" {
		if jobs, err = config.LoadJobs(node.Jobs); err != nil {
			return err
		}
	}

	etcdSettings := node.Client().Etcd
	etcdMetrics := newEtcdClientMetrics()
	if node.EmbeddedEtcd {
		// A single replica with its own etcd: several replicas each
		// embedding one would be separate clusters, each firing every job,
		// which is why server insists on one or the other, explicitly.
		etcd, err := etcdembed.Start(etcdembed.Config{Dir: filepath.Join(node.DataDir, "etcd"), Logger: log})
		if err != nil {
			return err
		}
		defer etcd.Close()
		log.Info("embedded etcd listening", "endpoint", etcd.Endpoint(), "dir", node.DataDir)
		etcdSettings.Endpoints = []string{etcd.Endpoint()}
	}
	cli, err := newEtcdClient(etcdSettings, etcdClientOptions{Verbose: node.LogLevel == "debug", DialOptions: etcdMetricsDial(etcdMetrics)})
	if err != nil {
		return err
	}
	defer cli.Close()

	lc := lease.DefaultConfig()
	lc.TTL, lc.Margin = node.LeaseTTL.D(), node.LeaseMargin.D()
	err = runReplica(c.Context(), cli, replicaConfig{
		Cluster: node.Cluster, Node: node.NodeID, HTTPAddr: node.HTTPAddr,
		Lease: lc, Shards: node.Shards, DrainTimeout: node.DrainTimeout.D(),
		MaxConcurrentRuns: node.MaxConcurrentRuns, Jobs: jobs, Logger: log,
		EtcdMetrics: etcdMetrics,
		HTTPTLS:     httpTLS, HTTPGuard: guard,
		ExecPolicy: runner.ExecPolicy{Disabled: !node.Exec, Allow: node.ExecAllow},
	})
	if err != nil && !errors.Is(err, c.Context().Err()) {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// warnUnknownEnv names the SHARDCRON_* variables that are no setting: a
// typo there would otherwise be ignored without a word. SHARDCRON_JOB_* are
// the jobs' own variables.
func warnUnknownEnv(fs *pflag.FlagSet, environ []string, log *slog.Logger) {
	known := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { known[config.EnvVar(f.Name)] = true })
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SHARDCRON_") && !strings.HasPrefix(name, config.JobVarPrefix) && !known[name] {
			log.Warn("environment variable is no setting; ignored", "name", name)
		}
	}
}
