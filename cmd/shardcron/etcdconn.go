package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/shardcron/shardcron/internal/keyspace"
)

// etcdOptions are the connection settings every subcommand that talks to
// etcd shares: endpoints, TLS and auth.
type etcdOptions struct {
	Endpoints []string
	CACert    string
	Cert      string
	Key       string
	Username  string
	Password  string
	// Verbose keeps the etcd client's own logger; it is quiet otherwise.
	Verbose bool
	// Metrics, when not nil, count and time the client's RPCs.
	Metrics *grpcprom.ClientMetrics
}

// bindEtcdFlags defines the connection flags of apply, export and status.
// Each also reads SHARDCRON_<FLAG>; a flag wins over the environment.
func bindEtcdFlags(fs *pflag.FlagSet, o *etcdOptions) {
	fs.StringSliceVar(&o.Endpoints, "etcd-endpoints", nil, "etcd endpoints, comma separated (env SHARDCRON_ETCD_ENDPOINTS)")
	fs.StringVar(&o.CACert, "etcd-cacert", "", "CA bundle that verifies etcd's certificate (env SHARDCRON_ETCD_CACERT)")
	fs.StringVar(&o.Cert, "etcd-cert", "", "client certificate for etcd (env SHARDCRON_ETCD_CERT)")
	fs.StringVar(&o.Key, "etcd-key", "", "client key for etcd (env SHARDCRON_ETCD_KEY)")
	fs.StringVar(&o.Username, "etcd-username", "", "etcd user (env SHARDCRON_ETCD_USERNAME)")
	fs.StringVar(&o.Password, "etcd-password", "", "etcd password; prefer the environment (env SHARDCRON_ETCD_PASSWORD)")
}

// fillFromEnv applies SHARDCRON_* variables to the flags that were not set.
func (o *etcdOptions) fillFromEnv(fs *pflag.FlagSet) {
	str := func(flag string, dst *string) {
		if v, ok := os.LookupEnv(envName(flag)); ok && !fs.Changed(flag) {
			*dst = v
		}
	}
	if v, ok := os.LookupEnv(envName("etcd-endpoints")); ok && !fs.Changed("etcd-endpoints") {
		o.Endpoints = strings.Split(v, ",")
	}
	str("etcd-cacert", &o.CACert)
	str("etcd-cert", &o.Cert)
	str("etcd-key", &o.Key)
	str("etcd-username", &o.Username)
	str("etcd-password", &o.Password)
}

// envName is the environment variable of a flag: SHARDCRON_ plus the flag
// name in upper snake case.
func envName(flag string) string {
	return "SHARDCRON_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// client connects to etcd. The etcd client's zap logger is built here and
// only here, silent unless Verbose.
func (o etcdOptions) client() (*clientv3.Client, error) {
	var eps []string
	for _, e := range o.Endpoints {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, usageError{errors.New("no etcd endpoints: set --etcd-endpoints or SHARDCRON_ETCD_ENDPOINTS")}
	}
	var tlsCfg *tls.Config
	if o.CACert != "" || o.Cert != "" || o.Key != "" {
		info := transport.TLSInfo{TrustedCAFile: o.CACert, CertFile: o.Cert, KeyFile: o.Key}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
	}
	log := zap.NewNop()
	if o.Verbose {
		var err error
		if log, err = zap.NewProduction(); err != nil {
			return nil, err
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		TLS:                  tlsCfg,
		Username:             o.Username,
		Password:             o.Password,
		Logger:               log,
		DialOptions:          o.dialOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(eps, ","), err)
	}
	return cli, nil
}

func (o etcdOptions) dialOptions() []grpc.DialOption {
	if o.Metrics == nil {
		return nil
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(o.Metrics.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(o.Metrics.StreamClientInterceptor()),
	}
}

// etcdClient is a connection and the cluster's key space.
type etcdClient struct {
	cli *clientv3.Client
	ks  keyspace.Space
}
