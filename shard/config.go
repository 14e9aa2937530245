package shard

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
)

// Defaults of Config.
const (
	DefaultDrainTimeout = 10 * time.Second
	DefaultSettleDelay  = time.Second
	DefaultResyncEvery  = 10 * time.Second
	DefaultJournalKeep  = time.Minute
	// DefaultAcquireParallelism bounds concurrent acquisitions (each one
	// transaction, one ranged read of the checkpoint and a Handler call).
	DefaultAcquireParallelism = 64
)

// Config of a Manager. Zero fields take their defaults; New validates.
type Config struct {
	// Cluster is the cluster name (keyspace.ValidCluster). Used in logs.
	Cluster string
	// Node is this replica's id, unique in the cluster. Required.
	Node string
	// Address is where this replica serves HTTP, published in its member
	// key for the dashboard and `status`. Optional.
	Address string
	// Version is this build's version, published in the member key.
	// Optional.
	Version string
	// JobSetFormat is the newest job set format this build reads
	// (jobstore.Format), published in the member key: an apply writes a
	// format only when every member reads it. Optional (0: format 1).
	JobSetFormat int
	// Features lists what of the jobs file this build runs that an older
	// release would misread (config.Features), published in the member
	// key: an apply that uses one is refused while a member lacks it.
	Features []string
	// Lease configures the node's session (TTL, margin, ...).
	Lease lease.Config
	// DrainTimeout bounds Handler.Drain for a shard that is released
	// (rebalance or shutdown). Default 10 s.
	DrainTimeout time.Duration
	// SettleDelay is how long a newly seen member waits before it counts
	// in the assignment, so a cold start of N replicas rebalances once
	// rather than N−1 times. Joins that are settling count together: a
	// settled join waits while another is still settling (for at most four
	// more settle delays), so replicas added one after another, each within
	// SettleDelay of the previous, move each shard once. A member once
	// counted stays counted until it leaves. Departures count at once.
	// Default 1 s.
	SettleDelay time.Duration
	// ResyncEvery is the period of the linearizable re-read of own/ that
	// backs up the watch (the reconcile loop is level-triggered). Default
	// 10 s.
	ResyncEvery time.Duration
	// OrphanAfter is how long a shard may stay free before the next member
	// in its preference list takes it (the k-th after k × OrphanAfter).
	// Default 2 × the lease TTL.
	OrphanAfter time.Duration
	// AcquireParallelism bounds concurrent acquisitions. Default 64.
	AcquireParallelism int
	// TriggerExpiry is how old a trigger request may grow before the owner
	// of its shard deletes it unrun (logged). Default 10 min.
	TriggerExpiry time.Duration
	// JournalKeep is how long the completion journal's values of a
	// session no member holds are kept after a sweep first sees them: its
	// shards' successors read them within the lease TTL and fold what they
	// name into their records at once. Default 1 min or 3 × OrphanAfter,
	// whichever is longer.
	JournalKeep time.Duration
	// Logger receives the Manager's messages. Default: discard.
	Logger *slog.Logger
	// Registerer, when not nil, receives the Manager's metrics.
	Registerer prometheus.Registerer
	// BadData receives the bad data the Manager meets in etcd (baddata.go).
	// Default: a Reporter of its own, on Registerer and Logger; Manager.BadData
	// returns it, for the job store and the readers to share.
	BadData *baddata.Reporter
}

// DefaultConfig returns the defaults for node in cluster.
func DefaultConfig(cluster, node string) Config {
	return Config{Cluster: cluster, Node: node, Lease: lease.DefaultConfig()}.withDefaults()
}

func (c Config) withDefaults() Config {
	if c.Lease.TTL == 0 {
		c.Lease.TTL = lease.DefaultTTL
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.SettleDelay == 0 {
		c.SettleDelay = DefaultSettleDelay
	}
	if c.ResyncEvery == 0 {
		c.ResyncEvery = DefaultResyncEvery
	}
	if c.OrphanAfter == 0 {
		c.OrphanAfter = 2 * c.Lease.TTL
	}
	if c.AcquireParallelism == 0 {
		c.AcquireParallelism = DefaultAcquireParallelism
	}
	if c.TriggerExpiry == 0 {
		c.TriggerExpiry = DefaultTriggerExpiry
	}
	if c.JournalKeep == 0 {
		// A free shard is taken by the k-th member of its preference list
		// after k × OrphanAfter at the latest: three of them have had
		// their turn.
		c.JournalKeep = max(DefaultJournalKeep, 3*c.OrphanAfter)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first problem with c (zero fields count as their
// defaults), wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case keyspace.ValidCluster(c.Cluster) != nil:
		return fmt.Errorf("%w: %w", ErrInvalidConfig, keyspace.ValidCluster(c.Cluster))
	case c.Node == "":
		return fmt.Errorf("%w: Node is required", ErrInvalidConfig)
	case len(c.Node) > 253:
		return fmt.Errorf("%w: Node %q is longer than 253 bytes", ErrInvalidConfig, c.Node)
	case c.DrainTimeout < 0:
		return fmt.Errorf("%w: DrainTimeout %v is negative", ErrInvalidConfig, c.DrainTimeout)
	case c.SettleDelay < 0:
		return fmt.Errorf("%w: SettleDelay %v is negative", ErrInvalidConfig, c.SettleDelay)
	case c.ResyncEvery < 100*time.Millisecond:
		return fmt.Errorf("%w: ResyncEvery %v is under 100ms", ErrInvalidConfig, c.ResyncEvery)
	case c.OrphanAfter < c.Lease.TTL:
		// A shard is free for up to a TTL after its owner crashed while the
		// desired successor takes it; taking orphans sooner only churns.
		return fmt.Errorf("%w: OrphanAfter %v is under the lease TTL %v", ErrInvalidConfig, c.OrphanAfter, c.Lease.TTL)
	case c.AcquireParallelism < 1:
		return fmt.Errorf("%w: AcquireParallelism %d is under 1", ErrInvalidConfig, c.AcquireParallelism)
	case c.TriggerExpiry < time.Second:
		return fmt.Errorf("%w: TriggerExpiry %v is under 1s", ErrInvalidConfig, c.TriggerExpiry)
	case c.JournalKeep < c.Lease.TTL:
		// A crashed session's successors read its journal once its lease
		// has expired: values must outlive that.
		return fmt.Errorf("%w: JournalKeep %v is under the lease TTL %v", ErrInvalidConfig, c.JournalKeep, c.Lease.TTL)
	}
	for _, r := range c.Node {
		if r == '/' || r < ' ' || r == 0x7f {
			return fmt.Errorf("%w: Node %q contains '/' or a control character", ErrInvalidConfig, c.Node)
		}
	}
	if err := c.Lease.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
