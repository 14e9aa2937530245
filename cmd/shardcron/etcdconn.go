package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// newEtcdClient connects to etcd with the settings' endpoints, TLS and
// auth. The etcd client's zap logger is built here and only here, silent
// unless verbose.
func newEtcdClient(e config.Etcd, verbose bool) (*clientv3.Client, error) {
	var tlsCfg *tls.Config
	if e.CACert != "" || e.Cert != "" || e.Key != "" {
		info := transport.TLSInfo{TrustedCAFile: e.CACert, CertFile: e.Cert, KeyFile: e.Key}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
	}
	log := zap.NewNop()
	if verbose {
		var err error
		if log, err = zap.NewProduction(); err != nil {
			return nil, err
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            e.Endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		TLS:                  tlsCfg,
		Username:             e.Username,
		Password:             e.Password,
		Logger:               log,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(e.Endpoints, ","), err)
	}
	return cli, nil
}

// etcdClient is a connection and the cluster's key space.
type etcdClient struct {
	cli *clientv3.Client
	ks  keyspace.Space
}

// clusterFlags are what the client subcommands share: the Shared settings
// of config's table (--config, --cluster, the etcd connection), resolved
// with the same precedence as server's, and --timeout.
type clusterFlags struct {
	cluster string // set by connect
	timeout time.Duration
}

func (f *clusterFlags) bind(c *cobra.Command) {
	config.BindClientFlags(c.Flags())
	c.Flags().DurationVar(&f.timeout, "timeout", time.Minute, "give up after this long")
}

// connect resolves the settings and returns a client, the cluster's key
// space, and a context bounded by --timeout.
func (f *clusterFlags) connect(c *cobra.Command) (context.Context, context.CancelFunc, *etcdClient, error) {
	s, err := config.ResolveClient(c.Flags(), os.Getenv)
	if err != nil {
		return nil, nil, nil, usageError{err}
	}
	f.cluster = s.Cluster
	cli, err := newEtcdClient(s.Etcd, false)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context(), f.timeout)
	return ctx, func() { cancel(); cli.Close() }, &etcdClient{cli, keyspace.New(s.Cluster)}, nil
}
