package scheduler

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	DefaultMaxConcurrentRuns = 64
	DefaultHistoryLen        = 20
	DefaultClaimAhead        = time.Second
	// DefaultContactWindow is how recent an answer from the store must be
	// for a claimed tick to start (Config.ContactWindow).
	DefaultContactWindow = 250 * time.Millisecond
)

// Config configures a Scheduler.
type Config struct {
	// Cluster is the cluster name, carried by every run (Run.Cluster).
	Cluster string
	// Node is this replica's id, carried by every run and recorded in run
	// history.
	Node string
	// Shards is S, the number of shards, as the cluster's meta records it.
	// Jobs map to shards by keyspace.ShardOf(name, Shards). Required.
	Shards int
	// MaxConcurrentRuns caps the runs of this node across all shards
	// (default 64). A tick is claimed only when a slot is free; a tick
	// waiting for one is late, not lost, until its starting deadline.
	MaxConcurrentRuns int
	// HistoryLen bounds the run history kept of each job (default 20).
	HistoryLen int
	// HistoryFlush is how often run history is handed to the Store's
	// History (default DefaultHistoryFlush, 2 s): what an owner killed at
	// the worst moment loses of it, with the wait for the middle of a
	// second and for a burst's line of due ticks to empty (history.go).
	HistoryFlush time.Duration
	// ClaimAhead is how long before its tick a tick is claimed (default
	// DefaultClaimAhead, 1 s). The scheduler raises it to four times the
	// slowest recent commit, up to MaxClaimAhead. One second lets a
	// per-second job's completion and its next claim share one write.
	ClaimAhead time.Duration
	// ContactWindow is how recently the node must have heard from the
	// store (Grant.Contact) for a claimed tick to start (default
	// DefaultContactWindow, 250 ms). A run that starts while the node is cut
	// off could not record its completion, and its successor would run the
	// tick again; held instead, the tick is late, not lost: it starts when
	// contact returns, or its shard moves on with it still unstarted. A
	// fault that begins more than the window before a tick therefore costs
	// no repeat. The window must exceed the store's probe interval and a
	// half plus a round trip (shard.ContactProbe, 50 ms).
	ContactWindow time.Duration
	// Clock reads the wall clock (nil: time.Now). Ticks, claims and
	// catch-up are judged on it; timers and the safe deadline are not. The
	// simulator steps and skews one owner's clock through it.
	Clock func() time.Time
	// Logger receives the scheduler's logs (nil: discarded).
	Logger *slog.Logger
	// Registerer receives the scheduler's metrics (nil: none registered).
	Registerer prometheus.Registerer
	// Tracer opens a span for each run and each attempt (nil: runs are not
	// traced). See trace.go.
	Tracer Tracer
	// Notifier sends the notifications jobs ask for (config.Notify). Nil:
	// none is sent; each decided one is counted as dropped.
	Notifier Notifier
	// NotifyTimeout bounds the sending of one notification (default
	// DefaultNotifyTimeout, 10 s).
	NotifyTimeout time.Duration
	// Journal makes a burst's completions durable in one cheap write
	// ahead of their records (journalwrite.go). Nil: completions go only
	// to their records, within the crash bound.
	Journal Journal
}

// DefaultConfig returns a Config with every default set; Cluster, Node and
// Shards remain to be filled in.
func DefaultConfig() Config {
	return Config{
		MaxConcurrentRuns: DefaultMaxConcurrentRuns,
		HistoryLen:        DefaultHistoryLen,
		HistoryFlush:      DefaultHistoryFlush,
		ClaimAhead:        DefaultClaimAhead,
		ContactWindow:     DefaultContactWindow,
		NotifyTimeout:     DefaultNotifyTimeout,
	}
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	if c.MaxConcurrentRuns == 0 {
		c.MaxConcurrentRuns = DefaultMaxConcurrentRuns
	}
	if c.HistoryLen == 0 {
		c.HistoryLen = DefaultHistoryLen
	}
	if c.HistoryFlush == 0 {
		c.HistoryFlush = DefaultHistoryFlush
	}
	if c.ClaimAhead == 0 {
		c.ClaimAhead = DefaultClaimAhead
	}
	if c.ContactWindow == 0 {
		c.ContactWindow = DefaultContactWindow
	}
	if c.NotifyTimeout == 0 {
		c.NotifyTimeout = DefaultNotifyTimeout
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first invalid field (zero fields count as their
// defaults), wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Cluster == "":
		return fmt.Errorf("%w: Cluster is empty", ErrInvalidConfig)
	case c.Node == "":
		return fmt.Errorf("%w: Node is empty", ErrInvalidConfig)
	case c.Shards < 1:
		return fmt.Errorf("%w: Shards %d < 1", ErrInvalidConfig, c.Shards)
	case c.MaxConcurrentRuns < 1:
		return fmt.Errorf("%w: MaxConcurrentRuns %d < 1", ErrInvalidConfig, c.MaxConcurrentRuns)
	case c.HistoryLen < 1:
		return fmt.Errorf("%w: HistoryLen %d < 1", ErrInvalidConfig, c.HistoryLen)
	case c.HistoryFlush < 0:
		return fmt.Errorf("%w: HistoryFlush %v < 0", ErrInvalidConfig, c.HistoryFlush)
	case c.NotifyTimeout < 0:
		return fmt.Errorf("%w: NotifyTimeout %v < 0", ErrInvalidConfig, c.NotifyTimeout)
	case c.ContactWindow < 0:
		return fmt.Errorf("%w: ContactWindow %v < 0", ErrInvalidConfig, c.ContactWindow)
	case c.ClaimAhead < 0 || c.ClaimAhead > MaxClaimAhead:
		return fmt.Errorf("%w: ClaimAhead %v not within 0..%v", ErrInvalidConfig, c.ClaimAhead, MaxClaimAhead)
	}
	return nil
}
