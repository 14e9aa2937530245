package lease

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config.
const (
	DefaultTTL             = 10 * time.Second
	DefaultMargin          = time.Second
	DefaultElectionTimeout = time.Second
	// DefaultMaxTxnOps is etcd's default --max-txn-ops: the most
	// comparisons, and separately the most operations per branch, that one
	// transaction may carry.
	DefaultMaxTxnOps = 128
	// MinTTL is the shortest TTL a session accepts. etcd raises shorter
	// TTLs to its own minimum (1.5 election timeouts, rounded up to whole
	// seconds: 2 s with etcd's defaults) anyway.
	MinTTL = 2 * time.Second
)

// Config of a Session. Zero fields take the defaults; Validate checks the
// fields against each other, and NewSession calls it.
//
// The renewal cadence is derived from the TTL etcd granted (which may be
// longer than the TTL asked for: etcd rounds up to whole seconds and to its
// minimum):
//
//   - a renewal is sent TTL/3 after the send time of the last successful one;
//   - each attempt is abandoned after TTL/6;
//   - after a failed attempt the next one is sent TTL/10 later.
//
// So a session survives about two consecutive lost renewal windows before
// its safe deadline passes, and it never waits for etcd to tell it that the
// lease expired.
type Config struct {
	// TTL of the node's etcd lease. Default 10 s. Granted in whole seconds
	// (rounded up); at least MinTTL. A longer TTL rides out longer etcd
	// stalls and leader elections; a shorter one moves a crashed node's
	// shards sooner (takeover is bounded by TTL + 1 s while etcd keeps its
	// leader).
	TTL time.Duration
	// Margin is subtracted from the lease's expiry as seen from this node:
	// the safe deadline is sent_at(last successful renewal) + granted TTL −
	// Margin. It covers the rate difference between this host's clock and
	// etcd's, and the time it takes to stop what runs. Default 1 s; Validate
	// refuses a Margin above TTL/2, which would leave too little of the TTL
	// to renew in.
	Margin time.Duration
	// ElectionTimeout is the etcd cluster's election timeout (etcd's
	// --election-timeout), default 1 s. It is used only for advice:
	// NewSession warns when the TTL is under six election timeouts, because
	// one etcd election (plus the retries around it) can then outlast the
	// lease's safe deadline and cost the node every shard.
	ElectionTimeout time.Duration
	// MaxTxnOps is etcd's --max-txn-ops, default 128. Batched releases put
	// MaxTxnOps/2 shards in one transaction (each costs one comparison, a
	// delete and a put, and one read-back on failure; etcd limits each list
	// separately).
	MaxTxnOps int
	// Logger receives the session's messages (lease granted, renewal
	// failures, loss, revocation). Default: discard.
	Logger *slog.Logger
	// Metrics receives renewal latency and failures; nil records nothing.
	Metrics *Metrics

	hooks *hooks // tests only
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		TTL:             DefaultTTL,
		Margin:          DefaultMargin,
		ElectionTimeout: DefaultElectionTimeout,
		MaxTxnOps:       DefaultMaxTxnOps,
		Logger:          slog.New(slog.DiscardHandler),
	}
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.TTL == 0 {
		c.TTL = d.TTL
	}
	if c.Margin == 0 {
		c.Margin = d.Margin
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = d.ElectionTimeout
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = d.MaxTxnOps
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate reports the first problem with c (zero fields count as their
// defaults), wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.TTL < MinTTL:
		return fmt.Errorf("%w: TTL %v is below the minimum %v", ErrInvalidConfig, c.TTL, MinTTL)
	case c.Margin < 0:
		return fmt.Errorf("%w: Margin %v is negative", ErrInvalidConfig, c.Margin)
	case c.Margin > c.TTL/2:
		return fmt.Errorf("%w: Margin %v exceeds half the TTL %v: too little time is left to renew in", ErrInvalidConfig, c.Margin, c.TTL)
	case c.ElectionTimeout < 0:
		return fmt.Errorf("%w: ElectionTimeout %v is negative", ErrInvalidConfig, c.ElectionTimeout)
	case c.MaxTxnOps < 2:
		return fmt.Errorf("%w: MaxTxnOps %d: a release needs two operations", ErrInvalidConfig, c.MaxTxnOps)
	}
	return nil
}

// ShortTTL reports whether the TTL is under six election timeouts, the
// condition NewSession warns about.
func (c Config) ShortTTL() bool {
	c = c.withDefaults()
	return c.TTL < 6*c.ElectionTimeout
}

// grantSeconds is the TTL asked of etcd: whole seconds, rounded up.
func (c Config) grantSeconds() int64 {
	return int64((c.TTL + time.Second - 1) / time.Second)
}

// cadence is the renewal schedule derived from a granted TTL.
type cadence struct {
	every   time.Duration // TTL/3 after the last success was sent
	attempt time.Duration // per-attempt timeout, TTL/6
	retry   time.Duration // TTL/10 after a failure
}

func cadenceFor(ttl time.Duration) cadence {
	return cadence{every: ttl / 3, attempt: ttl / 6, retry: ttl / 10}
}
