package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/shardcron/shardcron/config/settings"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// etcdClientOptions are how cmd wants its etcd client beyond the settings.
type etcdClientOptions struct {
	// Verbose keeps the etcd client's own logger; it is quiet otherwise.
	Verbose bool
	// DialOptions are added to the client's gRPC dial (interceptors).
	DialOptions []grpc.DialOption
}

// newEtcdClient connects to etcd with the settings' endpoints, TLS and
// auth. The etcd client's zap logger is built here and only here, silent
// unless o.Verbose.
func newEtcdClient(e settings.Etcd, o etcdClientOptions) (*clientv3.Client, error) {
	tlsCfg, err := etcdTLS(e)
	if err != nil {
		return nil, err
	}
	log := zap.NewNop()
	if o.Verbose {
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
		DialOptions:          o.DialOptions,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w%s", strings.Join(e.Endpoints, ","), err, explainTLS(e.Endpoints, tlsCfg))
	}
	return cli, nil
}

// etcdTLS is the client's TLS configuration: nil without CA and
// certificate, in which case https endpoints use the system's roots.
func etcdTLS(e settings.Etcd) (*tls.Config, error) {
	if e.CACert == "" && e.Cert == "" && e.Key == "" {
		return nil, nil
	}
	info := transport.TLSInfo{TrustedCAFile: e.CACert, CertFile: e.Cert, KeyFile: e.Key}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: %w", err)
	}
	return cfg, nil
}

// explainTLS says what a TLS handshake with the endpoints reports, or "".
// A gRPC dial whose handshake fails retries until its deadline and then
// says only "context deadline exceeded", which names no cause.
func explainTLS(endpoints []string, cfg *tls.Config) string {
	for _, ep := range endpoints[:min(len(endpoints), 3)] {
		scheme, host, ok := strings.Cut(ep, "://")
		if !ok {
			scheme, host = "", ep
		}
		if scheme != "https" && (cfg == nil || scheme != "") {
			continue
		}
		if err := probeTLS(host, cfg); err != nil {
			return fmt.Sprintf(" (TLS with %s: %v)", host, err)
		}
	}
	return ""
}

func explainEtcdTLS(e settings.Etcd) string {
	cfg, err := etcdTLS(e)
	if err != nil {
		return ""
	}
	return explainTLS(e.Endpoints, cfg)
}

// probeTLS completes a handshake with host and waits briefly for the
// server's verdict on the client certificate, which TLS 1.3 sends after
// the client considers the handshake done.
func probeTLS(host string, cfg *tls.Config) error {
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", host, cfg.Clone())
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
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
	settings.BindClientFlags(c.Flags())
	c.Flags().DurationVar(&f.timeout, "timeout", time.Minute, "give up after this long")
}

// connect resolves the settings and returns a client, the cluster's key
// space, and a context bounded by --timeout.
func (f *clusterFlags) connect(c *cobra.Command) (context.Context, context.CancelFunc, *etcdClient, error) {
	s, err := settings.ResolveClient(c.Flags(), os.Getenv)
	if err != nil {
		return nil, nil, nil, usageError{err}
	}
	if err := clientFilesOf(c.Flags(), s); err != nil {
		return nil, nil, nil, err
	}
	if err := positiveFlag("timeout", f.timeout); err != nil {
		return nil, nil, nil, err
	}
	f.cluster = s.Cluster
	cli, err := newEtcdClient(s.Etcd, etcdClientOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context(), f.timeout)
	ks := keyspace.New(s.Cluster)
	// One read first, so that a connection that cannot work is reported as
	// such (with the TLS handshake's reason) rather than as the first
	// command step that timed out.
	if _, err := cli.Get(ctx, ks.Meta(), clientv3.WithCountOnly()); err != nil {
		cancel()
		cli.Close()
		return nil, nil, nil, fmt.Errorf("etcd %s: %w%s", strings.Join(s.Etcd.Endpoints, ","), err, explainEtcdTLS(s.Etcd))
	}
	return ctx, func() { cancel(); cli.Close() }, &etcdClient{cli, ks}, nil
}
