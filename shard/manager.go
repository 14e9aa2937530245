package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/rebalance"
	"github.com/shardcron/shardcron/scheduler"
)

// Handler receives ownership events. *scheduler.Scheduler implements it.
type Handler interface {
	// Acquired hands over a shard this node just acquired, with the
	// checkpoint read after the acquisition. It should finish catch-up
	// quickly; Store may be used during the call. Called from a worker
	// goroutine, concurrently for different shards.
	Acquired(g scheduler.Grant)
	// Drain stops firing shard, waits for (or cancels) its runs until ctx
	// ends (Config.DrainTimeout), and returns what the release marker
	// says: when the shard stopped firing (the successor runs every tick
	// due since then) and the ticks in flight never started. Called only
	// after Acquired returned for the shard's Grant, once per Grant, and
	// never when the Grant was lost (its Lost context is its stop signal).
	Drain(ctx context.Context, shard int) scheduler.Released
	// StopFiring stops firing shard at once and returns what Drain will
	// return, without waiting for its runs; Drain follows it. Called
	// under the same conditions as Drain.
	StopFiring(shard int) scheduler.Released
	// Triggered hands over a trigger request of a shard this node holds,
	// under the token of its Grant. It may be called many times for one
	// request, from the Manager's trigger watcher and from acquisitions; it
	// must not block for long.
	Triggered(scheduler.Trigger)
}

// Manager keeps this node's share of the shards. Build it with New, run it
// with Run (once), which takes the Handler: whatever handles ownership
// events (the scheduler) may be built from the Manager's Store in between.
type Manager struct {
	cli     *clientv3.Client
	ks      keyspace.Space
	meta    Meta
	params  rebalance.Params
	cfg     Config
	h       Handler // set by Run before its loop starts
	log     *slog.Logger
	met     *metrics
	feed    *feed // ownership changes for the dashboard
	bad     *baddata.Reporter
	contact *lease.Contact // this node's contact with etcd (contact.go)
	started time.Time
	// leaveBy is when a graceful leave must be over (loop.beginStop), zero
	// until one begins; Run's goroutine only.
	leaveBy time.Time
	ran     atomic.Bool

	// poke wakes the loop when something outside it changed a holding (a
	// fenced write found the shard lost). Buffered 1; never closed.
	poke chan struct{}
	// journalOpen is set while every member reads the completion journal
	// (journal.go); the loop keeps it.
	journalOpen atomic.Bool
	// journalWrote is the lease of the last session that wrote journal
	// values: a graceful leave deletes its own only if it wrote any.
	journalWrote atomic.Int64
	// cps batches the checkpoint reads of shards acquired together.
	cps checkpoints

	mu      sync.Mutex
	sess    *lease.Session // the current session; nil between sessions
	held    map[int]*holding
	v       *view // written by the loop under mu; read by State
	assign  rebalance.Assignment
	alarm   bool      // etcd reports a NOSPACE alarm
	noSpace time.Time // the last write refused for lack of space
	wErr    error     // the last write's RPC error, cleared by a success
	wErrAt  time.Time
	asOf    time.Time // when etcd last answered the previous session

	bg sync.WaitGroup // revocations of lost sessions; joined by Run

	hist *history.Writer // run history, written on this Manager's fence (fence.go)

	trig *triggers // trigger requests; nil unless the Handler takes them (trigger.go); set by Run
}

// holding is one shard this node holds under its current session.
type holding struct {
	tok    lease.Token
	since  time.Time
	lost   context.Context
	cancel context.CancelCauseFunc
	// orphanOf is set when the shard was taken as an orphan: the desired
	// owner that left it free.
	orphanOf memberRef
	// marker is the release marker this acquisition consumed: the window
	// the previous ownership handed over; nil if none.
	marker *lease.Marker
	// Loop-owned fields below.
	phase phase
	// released is what the release marker will say; a zero StoppedAt
	// writes none.
	released scheduler.Released
}

type phase int

const (
	granting  phase = iota // acquired; Handler.Acquired running
	active                 // granted
	draining               // Handler.Drain running
	releasing              // drained, Lost cancelled; release pending or sent
	ungranted              // acquired but the checkpoint is unreadable
)

// New checks cfg and meta and returns a Manager for ks's cluster. It starts
// nothing; Run does.
func New(cli *clientv3.Client, ks keyspace.Space, meta Meta, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := meta.Validate(); err != nil {
		return nil, err
	}
	if cli == nil {
		return nil, fmt.Errorf("%w: a client is required", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	m := &Manager{
		cli:     cli,
		ks:      ks,
		meta:    meta,
		params:  meta.Params(),
		cfg:     cfg,
		log:     cfg.Logger.With("cluster", cfg.Cluster, "node", cfg.Node),
		started: time.Now().UTC().Truncate(time.Millisecond),
		poke:    make(chan struct{}, 1),
		held:    map[int]*holding{},
		v:       newView(),
		feed:    newFeed(),
		contact: lease.NewContact(),
	}
	m.hist = history.NewWriter(cli, ks, m)
	m.cps.m = m
	if cfg.Lease.Logger == nil {
		m.cfg.Lease.Logger = m.log
	}
	m.assign, _ = rebalance.Assign(nil, m.params) // params validated with meta
	if err := m.instrument(cfg.Registerer); err != nil {
		return nil, err
	}
	if m.cfg.BadData == nil {
		var err error
		if m.cfg.BadData, err = baddata.New(cfg.Registerer, m.log); err != nil {
			return nil, err
		}
	}
	m.bad = m.cfg.BadData
	return m, nil
}

// BadData is the Reporter of bad data in etcd the Manager reports to.
func (m *Manager) BadData() *baddata.Reporter { return m.bad }

// Meta returns the cluster meta the Manager obeys.
func (m *Manager) Meta() Meta { return m.meta }

// Run keeps this node in the cluster until ctx is cancelled, handing
// ownership events to h: it starts a
// session, joins, and reconciles; when the session is lost it stops every
// Grant at once and starts over with a new session. When ctx is cancelled it
// leaves gracefully (member key first, then drain and release every shard,
// then revoke) and returns nil. It returns an error only for what an
// operator must fix (ErrDuplicateNode). Run may be called once.
func (m *Manager) Run(ctx context.Context, h Handler) error {
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("shard: Run called twice")
	}
	if h == nil {
		return fmt.Errorf("%w: a Handler is required", ErrInvalidConfig)
	}
	m.h = h // before the loop's goroutines start: they read it unlocked
	defer m.bg.Wait()
	// The background goroutines end with Run, which may return before ctx
	// ends (a duplicate node id): stop runs before the Wait above.
	bgCtx, stop := context.WithCancel(ctx)
	defer stop()
	m.bg.Go(func() { m.probeContact(bgCtx) })
	m.trig = newTriggers(m, h) // before any acquisition: grant reads it
	m.bg.Go(func() { m.trig.run(bgCtx) })
	// Lost sessions' revocations run on in the background; they give up
	// when Run returns.
	revoking, giveUp := context.WithCancel(context.WithoutCancel(ctx))
	defer giveUp()
	first := max(m.cfg.Lease.TTL/10, 100*time.Millisecond)
	retry, failures := first, 0
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, m.cfg.Lease.TTL/2)
		sess, err := lease.NewSession(gctx, m.cli, m.ks, m.cfg.Lease)
		cancel()
		if err != nil {
			// Log the first failure of an outage loudly, the retries quietly.
			if failures++; ctx.Err() == nil {
				lvl := slog.LevelDebug
				if failures == 1 {
					lvl = slog.LevelWarn
				}
				m.log.Log(ctx, lvl, "cannot start a lease session; retrying", "err", err, "failures", failures)
			}
			select {
			case <-ctx.Done():
			case <-time.After(retry):
			}
			retry = min(2*retry, m.cfg.Lease.TTL/2)
			continue
		}
		if failures > 0 {
			m.log.Info("lease session started after failures", "failures", failures)
		}
		retry, failures = first, 0
		err = m.runSession(ctx, sess)
		if err != nil || ctx.Err() != nil {
			by, cancel := context.WithDeadline(revoking, m.revokeBy())
			sess.CloseWithin(by)
			cancel()
			return err
		}
		// Lost: revoke the old lease in the background (always safe: this
		// node no longer acts under it) and start a new session at once.
		m.bg.Go(func() { sess.CloseWithin(revoking) })
	}
	return nil
}

// revokeBy bounds the last session's revocation when Run returns: the
// leave's bound (DESIGN: a SIGTERM exits within the drain timeout plus a
// second), or a second from now if no leave began. Revoking is a
// courtesy; etcd expires a lease it never hears about again.
func (m *Manager) revokeBy() time.Time {
	if m.leaveBy.IsZero() {
		return time.Now().Add(time.Second)
	}
	return m.leaveBy
}

// runSession runs one session until it is lost (nil error, ctx live), ctx
// is cancelled and the node has left (nil error), or a fatal error.
func (m *Manager) runSession(ctx context.Context, sess *lease.Session) error {
	l := newLoop(m, sess)
	m.mu.Lock()
	m.sess = sess
	m.wErr = nil // an earlier session's failed writes say nothing of this one
	m.mu.Unlock()
	m.met.session.Set(1)
	defer l.end()

	if _, err := m.register(ctx, sess); err != nil {
		if errors.Is(err, ErrDuplicateNode) {
			return err
		}
		return nil // ctx cancelled or session lost: Run decides
	}
	return l.run(ctx)
}

// dropAll ends every holding of the session (cause) and forgets it.
func (m *Manager) dropAll(cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s, h := range m.held {
		h.cancel(cause)
		delete(m.held, s)
		if h.phase != releasing {
			m.met.lost.WithLabelValues(causeLabel(cause)).Inc()
		}
	}
	if m.sess != nil {
		m.asOf = m.sess.Renewed() // what the view kept is as of (stale.go)
	}
	m.sess = nil
	m.met.owned.Set(0)
	m.met.session.Set(0)
}

func causeLabel(err error) string {
	if errors.Is(err, scheduler.ErrDeadline) {
		return "deadline"
	}
	return "fenced"
}

func (m *Manager) wake() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}
