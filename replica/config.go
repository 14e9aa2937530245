package replica

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/rebalance"
	"github.com/shardcron/shardcron/runner"
	"github.com/shardcron/shardcron/scheduler"
)

// Config is what one replica needs, whether `server` runs it alone or `dev`
// runs several in one process. Zero fields take their defaults.
type Config struct {
	// Cluster is the cluster name (keyspace.ValidCluster). Required.
	Cluster string
	// Node is this replica's id, unique in the cluster. Required.
	Node string
	// Listener serves HTTP, with TLS when the caller wrapped it so. Run
	// serves on it and closes it; if Run is never called, the caller
	// closes it. Required.
	Listener net.Listener
	// AdvertiseAddr is the host:port published in the member key
	// (config.CheckAdvertiseAddr). "": the listener's address, with the
	// host name for an unspecified host (advertise.go).
	AdvertiseAddr string
	// WrapHTTP, when set, wraps every HTTP request (token auth).
	WrapHTTP func(http.Handler) http.Handler
	// TraceUIURL links the job page's trace ids (--trace-ui-url,
	// settings.CheckTraceUIURL); "" shows them as text.
	TraceUIURL string
	// Lease configures the node's session (TTL, margin).
	Lease lease.Config
	// Shards is S, used only when the cluster is created (default
	// rebalance.DefaultShards, 1,024).
	Shards int
	// DrainTimeout bounds draining a shard's runs on release (default
	// shard.DefaultDrainTimeout, 10 s).
	DrainTimeout time.Duration
	// MaxConcurrentRuns caps this replica's runs (default
	// scheduler.DefaultMaxConcurrentRuns, 64).
	MaxConcurrentRuns int
	// Jobs bootstraps an empty cluster's job set (--jobs); otherwise a
	// difference is reported as drift. Nil: no bootstrap, no drift.
	Jobs []config.Job
	// Env is the environment ${SHARDCRON_JOB_*} references and exec jobs'
	// PATH and HOME come from. Nil: the process environment.
	Env func(string) (string, bool)
	// ExecPolicy says which exec jobs this replica runs.
	ExecPolicy runner.ExecPolicy
	// Egress says which addresses this replica's http jobs may reach.
	Egress runner.EgressPolicy
	// Version is this build's version, published in the member key.
	Version string
	// Registry receives every metric of the replica and is what /metrics
	// serves. Nil: a registry of the replica's own metrics only.
	Registry *prometheus.Registry
	// Tracer traces every run (package tracing). Nil: runs are not traced.
	Tracer scheduler.Tracer
	// Logger receives the replica's logs. Nil: discarded.
	Logger *slog.Logger
	// Listening, when set, is told the bound HTTP address once the
	// replica is wired and serves every path.
	Listening func(addr string)
}

func (c Config) withDefaults() Config {
	if c.Shards == 0 {
		c.Shards = rebalance.DefaultShards
	}
	if c.Env == nil {
		c.Env = os.LookupEnv
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first problem with c (zero fields count as their
// defaults), wrapped in ErrInvalidConfig. The shard Manager and the
// scheduler check their own fields again when Run builds them.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case keyspace.ValidCluster(c.Cluster) != nil:
		return fmt.Errorf("%w: %w", ErrInvalidConfig, keyspace.ValidCluster(c.Cluster))
	case c.Node == "":
		return fmt.Errorf("%w: Node is required", ErrInvalidConfig)
	case c.Listener == nil:
		return fmt.Errorf("%w: Listener is required", ErrInvalidConfig)
	case c.Shards < 1 || c.Shards > keyspace.MaxShards:
		return fmt.Errorf("%w: Shards %d is not within 1..%d", ErrInvalidConfig, c.Shards, keyspace.MaxShards)
	case c.DrainTimeout < 0:
		return fmt.Errorf("%w: DrainTimeout %v is negative", ErrInvalidConfig, c.DrainTimeout)
	case c.MaxConcurrentRuns < 0:
		return fmt.Errorf("%w: MaxConcurrentRuns %d is negative", ErrInvalidConfig, c.MaxConcurrentRuns)
	}
	if err := c.Lease.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
