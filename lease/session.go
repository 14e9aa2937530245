package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
)

// Session is a node's etcd lease, renewed by its own goroutine, with a safe
// deadline that passes before etcd can expire the lease. Every key the node
// holds (its member key, its shard leases) is attached to it.
//
// A Session is safe for concurrent use. Valid, Remaining, Deadline and Done
// never block.
type Session struct {
	cli *clientv3.Client
	ks  keyspace.Space
	cfg Config
	log *slog.Logger
	now clock
	id  clientv3.LeaseID
	ttl time.Duration // as etcd granted it

	// deadline is the safe deadline on now's clock, in nanoseconds. It only
	// moves forward, and only while ended is false.
	deadline atomic.Int64
	ended    atomic.Bool
	// renewed is the wall-clock time (Unix nanoseconds) the last renewal
	// etcd answered (or the grant) was sent: what "as of" a replica's view
	// is. Not when the answer was read: one etcd sent just before it
	// stopped may be read later, and must not date the view after the stop.
	renewed atomic.Int64

	mu    sync.Mutex  // serialises extending the deadline against ending
	timer *time.Timer // fires at the deadline; guarded by mu

	// done is closed by end, under mu, when the deadline passes, etcd
	// reports the lease gone, or the session is closed. Never reopened.
	done   chan struct{}
	ctx    context.Context // cancelled with done; cause ErrLost or ErrClosed
	cancel context.CancelCauseFunc

	// loopDone is closed by the renew loop when it has stopped renewing and
	// finished revoking the lease. Close waits for it.
	loopDone  chan struct{}
	revokeErr error // written by the loop before loopDone closes
	// giveUp, closed by CloseWithin once its context ends, stops the
	// revocation.
	giveUp     chan struct{}
	giveUpOnce sync.Once
}

// NewSession grants a lease of cfg.TTL and starts renewing it. ctx bounds
// only the grant; the session lives until it is lost or closed. The caller
// owns the session and must Close it.
func NewSession(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, cfg Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.ShortTTL() {
		cfg.Logger.Warn("lease TTL is under six etcd election timeouts: one etcd election can outlast the safe deadline and cost this node its shards",
			"ttl", cfg.TTL, "election_timeout", cfg.ElectionTimeout)
	}
	now := boottime
	if cfg.hooks != nil && cfg.hooks.clock != nil {
		now = cfg.hooks.clock
	}
	sent := now()
	resp, err := cli.Grant(ctx, cfg.grantSeconds())
	if err != nil {
		return nil, fmt.Errorf("lease: grant: %w", err)
	}
	s := &Session{
		cli:      cli,
		ks:       ks,
		cfg:      cfg,
		now:      now,
		id:       resp.ID,
		ttl:      time.Duration(resp.TTL) * time.Second,
		done:     make(chan struct{}),
		loopDone: make(chan struct{}),
		giveUp:   make(chan struct{}),
	}
	s.log = cfg.Logger.With("lease", fmt.Sprintf("%016x", int64(s.id)))
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.deadline.Store(int64(sent + s.ttl - cfg.Margin))
	s.renewed.Store(s.wallAt(sent).UnixNano())
	// Read the time left before taking mu: Remaining ends the session when
	// the grant took longer than TTL − Margin, and ending takes mu.
	left := s.Remaining()
	s.mu.Lock()
	s.timer = time.AfterFunc(left, s.onTimer)
	s.mu.Unlock()
	go s.loop()
	if !s.Valid() {
		// The grant took longer than TTL − Margin: the lease is unusable.
		s.Close()
		return nil, fmt.Errorf("%w: the grant took longer than the TTL less the margin", ErrLost)
	}
	s.log.Info("lease granted", "ttl", s.ttl, "margin", cfg.Margin)
	return s, nil
}

// LeaseID is the etcd lease.
func (s *Session) LeaseID() clientv3.LeaseID { return s.id }

// TTL is the lease's TTL as etcd granted it (whole seconds, at least
// Config.TTL).
func (s *Session) TTL() time.Duration { return s.ttl }

// Valid reports whether the node may act now: the session is neither closed
// nor lost and the clock (CLOCK_BOOTTIME) is before the safe deadline. It
// reads the clock itself rather than trusting a timer to have fired, so it
// is right even just after the process was paused. Call it right before
// every externally visible action.
func (s *Session) Valid() bool {
	if s.ended.Load() {
		return false
	}
	if s.now() >= time.Duration(s.deadline.Load()) {
		s.lose("safe deadline passed")
		return false
	}
	return true
}

// Remaining is the time left until the safe deadline; zero or less means
// stop now. It satisfies scheduler.Deadline.
func (s *Session) Remaining() time.Duration {
	if s.ended.Load() {
		return 0
	}
	r := time.Duration(s.deadline.Load()) - s.now()
	if r <= 0 {
		s.lose("safe deadline passed")
	}
	return r
}

// Deadline is the safe deadline as an absolute instant: the node may act
// while CLOCK_BOOTTIME reads less than it (in nanoseconds since boot); zero
// once the session ended. It reads no clock, so a caller that hands the
// deadline to another process on the same host (the exec supervisor) passes
// exactly this instant, where now + Remaining() would be stretched by any
// stall between the two clock reads. It satisfies scheduler.Deadline.
func (s *Session) Deadline() time.Duration {
	if s.ended.Load() {
		return 0
	}
	return time.Duration(s.deadline.Load())
}

// Renewed is when the last request of this session etcd answered was
// sent (its grant or its last successful renewal), on the wall clock: etcd
// was in contact at least until then. It stays at that instant after the
// session ends, so a view kept from etcd can say how old it is.
func (s *Session) Renewed() time.Time { return time.Unix(0, s.renewed.Load()) }

// Done is closed the moment the session ends: its safe deadline passed (a
// timer; Valid notices even earlier after a pause), etcd reported the lease
// gone, or it was closed. It is never reopened.
func (s *Session) Done() <-chan struct{} { return s.done }

// Context is cancelled with Done. Its cause (context.Cause) is ErrLost or
// ErrClosed.
func (s *Session) Context() context.Context { return s.ctx }

// Err is nil while the session is live, then ErrLost or ErrClosed.
func (s *Session) Err() error {
	if !s.ended.Load() {
		return nil
	}
	return context.Cause(s.ctx)
}

// Close ends the session: it stops renewing, then revokes the lease
// (retrying until etcd confirms or reports the lease gone, bounded by the
// TTL), and waits for both. Idempotent; safe to call on a lost session,
// whose revocation is already under way.
func (s *Session) Close() { s.CloseWithin(context.Background()) }

// CloseWithin is Close, except that the revocation gives up when ctx ends:
// a node leaving while etcd does not answer must still exit within its
// drain bound, and etcd expires the lease by itself.
func (s *Session) CloseWithin(ctx context.Context) {
	s.end(ErrClosed, "closed")
	select {
	case <-s.loopDone:
		return
	case <-ctx.Done():
	}
	s.giveUpOnce.Do(func() { close(s.giveUp) })
	<-s.loopDone
}

// onTimer runs when the deadline timer fires. The timer runs on Go's
// monotonic clock, which lags CLOCK_BOOTTIME after a suspend, so it can only
// fire late, never early; it re-arms when a renewal moved the deadline.
func (s *Session) onTimer() {
	s.mu.Lock()
	if s.ended.Load() {
		s.mu.Unlock()
		return
	}
	if r := time.Duration(s.deadline.Load()) - s.now(); r > 0 {
		s.timer.Reset(r)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.lose("safe deadline passed")
}

// wallAt is the wall-clock time of t on now's clock.
func (s *Session) wallAt(t time.Duration) time.Time {
	return time.Now().Add(t - s.now())
}

// extend moves the deadline after a successful renewal sent at sent, unless
// the session already ended or its deadline passed before the response was
// processed: a late renewal never revives a session.
func (s *Session) extend(sent time.Duration, ttlSeconds int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended.Load() {
		return false
	}
	old := time.Duration(s.deadline.Load())
	if s.now() >= old {
		s.endLocked(ErrLost, "renewal arrived after the safe deadline")
		return false
	}
	s.renewed.Store(s.wallAt(sent).UnixNano())
	if d := sent + time.Duration(ttlSeconds)*time.Second - s.cfg.Margin; d > old {
		s.deadline.Store(int64(d))
		s.timer.Reset(d - s.now())
	}
	return true
}

func (s *Session) lose(why string) { s.end(ErrLost, why) }

func (s *Session) end(cause error, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(cause, why)
}

func (s *Session) endLocked(cause error, why string) {
	if s.ended.Load() {
		return
	}
	s.ended.Store(true)
	if s.timer != nil {
		s.timer.Stop()
	}
	s.cancel(cause)
	close(s.done)
	if errors.Is(cause, ErrLost) {
		s.log.Warn("lease session lost: stop acting on every shard", "reason", why)
	} else {
		s.log.Info("lease session closed")
	}
}

// refuse returns the error for an action refused because the session
// ended (ErrLost or ErrClosed), naming what was refused.
func (s *Session) refuse(what string) error {
	cause := context.Cause(s.ctx)
	if cause == nil {
		cause = ErrLost // the deadline passed; end is being called
	}
	return fmt.Errorf("%w: %s refused", cause, what)
}

// checkGone passes err through, unless it says that the lease no longer
// exists in etcd: then the session is lost, and the error wraps ErrLost.
func (s *Session) checkGone(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.lose("etcd reports the lease gone")
		return fmt.Errorf("%w: %v", ErrLost, err)
	}
	return err
}
