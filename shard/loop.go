package shard

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// loop is the state of one session's reconcile loop. Its fields are owned
// by the goroutine that runs run, except where noted.
type loop struct {
	m    *Manager
	sess *lease.Session
	v    *view

	// lostCtx is the parent of every Grant's Lost context: cancelled with
	// scheduler.ErrDeadline by an AfterFunc the instant the session ends.
	lostCtx    context.Context
	lostCancel context.CancelCauseFunc
	stopAfter  func() bool

	// results carries worker outcomes to the loop; never closed. Workers
	// send with a select on quit, which end closes before joining them (wg).
	results chan result
	quit    chan struct{}
	wg      sync.WaitGroup

	wch     clientv3.WatchChan // nil while the watch is down
	wcancel context.CancelFunc
	relist  time.Time // when to re-read own/ (zero: not scheduled)

	acquiring map[int]bool      // acquisitions in flight
	retryAt   map[int]time.Time // do not try to acquire before
	released  map[int]int64     // the token of each shard's last release in this session
	releasing bool              // a Release call is in flight
	relRetry  time.Time         // when to retry failed releases
	wakeAt    time.Time         // the earliest timed decision
	stopping  bool
	stopBy    time.Time

	members string // the counted member list the assignment was built from
	ranks   []int  // this node's preference rank per shard; nil: not computed
	drained bool   // this node's drain flag, as last logged

	// journalDead is when each journal session no member holds was first
	// seen (journal.go); sweeping is set while a sweep is out.
	journalDead map[string]time.Time
	sweeping    bool
}

func newLoop(m *Manager, sess *lease.Session) *loop {
	l := &loop{
		m:         m,
		sess:      sess,
		v:         newView(),
		results:   make(chan result, 64),
		quit:      make(chan struct{}),
		acquiring: map[int]bool{},
		retryAt:   map[int]time.Time{},
		released:  map[int]int64{},
		members:   "\x00", // matches no member list
	}
	l.lostCtx, l.lostCancel = context.WithCancelCause(context.Background())
	l.stopAfter = context.AfterFunc(sess.Context(), func() { l.lostCancel(scheduler.ErrDeadline) })
	return l
}

// end stops the watch and the workers and drops every holding. After a
// graceful leave there are none left; after a loss each Grant's Lost is
// already done (ErrDeadline).
func (l *loop) end() {
	l.lostCancel(scheduler.ErrDeadline)
	l.stopAfter()
	if l.wcancel != nil {
		l.wcancel()
	}
	close(l.quit)
	l.wg.Wait()
	l.m.dropAll(scheduler.ErrDeadline)
	l.publish()
}

// send delivers a worker's result unless the loop has ended.
func (l *loop) send(r result) {
	select {
	case l.results <- r:
	case <-l.quit:
	}
}

func (l *loop) run(ctx context.Context) error {
	resync := time.NewTicker(l.m.cfg.ResyncEvery)
	defer resync.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	l.relist = time.Now()
	initial := true
	for {
		now := time.Now()
		if !l.relist.IsZero() && !now.Before(l.relist) {
			if l.list(initial) {
				initial = false
			}
		}
		if !initial {
			l.reconcile(time.Now())
		}
		if l.stopping && l.idle() {
			l.dropOwnJournal()
			l.m.log.Info("left: every shard released")
			return nil
		}
		if l.stopping && time.Now().After(l.stopBy) {
			l.m.log.Warn("leaving with shards not released; they move when the lease is revoked")
			return nil
		}
		l.armWake(wake)
		var done <-chan struct{}
		if !l.stopping {
			done = ctx.Done()
		}
		select {
		case <-done:
			l.beginStop()
		case <-l.sess.Done():
			l.m.log.Warn("session lost: every shard stopped; starting a new session", "err", l.sess.Err())
			return nil
		case resp, ok := <-l.wch:
			l.watched(resp, ok)
		case <-resync.C:
			l.relist = time.Now()
			l.sweepJournal()
			l.checkAlarm()
			l.checkMeta() // metaguard.go
		case <-wake.C:
		case <-l.m.poke:
		case r := <-l.results:
			r.apply(l)
		}
		l.coalesce()
		l.m.journalOpen.Store(l.v.readJournal())
	}
}

// coalesce applies whatever else is already waiting (worker results, watch
// responses) before the next reconcile pass, so a burst of a thousand
// acquisitions costs a few passes, not a thousand.
func (l *loop) coalesce() {
	for range 1024 {
		select {
		case r := <-l.results:
			r.apply(l)
		case resp, ok := <-l.wch:
			l.watched(resp, ok)
		default:
			return
		}
	}
}

// armWake sets the timer to the earliest pending timed decision.
func (l *loop) armWake(t *time.Timer) {
	at := l.wakeAt
	for _, x := range []time.Time{l.relist, l.relRetry} {
		if !x.IsZero() && (at.IsZero() || x.Before(at)) {
			at = x
		}
	}
	if l.stopping && (at.IsZero() || l.stopBy.Before(at)) {
		at = l.stopBy
	}
	d := time.Hour
	if !at.IsZero() {
		d = max(time.Until(at), time.Millisecond)
	}
	t.Reset(d)
}

// idle reports whether nothing is held or in flight.
func (l *loop) idle() bool {
	l.m.mu.Lock()
	n := len(l.m.held)
	l.m.mu.Unlock()
	return n == 0 && len(l.acquiring) == 0 && !l.releasing
}

// beginStop starts a graceful leave: the member key goes first, so peers
// aim at the successors while this node drains; the session keeps renewing
// throughout.
func (l *loop) beginStop() {
	l.stopping = true
	// Drains end by the drain timeout; releases take milliseconds while
	// etcd answers. If it does not, leave anyway: the revocation (or the
	// lease's expiry) frees the shards.
	l.stopBy = time.Now().Add(l.m.cfg.DrainTimeout + time.Second)
	l.m.leaveBy = l.stopBy
	l.m.log.Info("leaving: deregistering, then draining and releasing every shard")
	l.m.deregister(context.Background(), l.sess)
}

// list re-reads own/ (linearizable) and restarts the watch if it is down.
func (l *loop) list(initial bool) bool {
	ctx, cancel := context.WithTimeout(l.sess.Context(), l.sess.TTL()/3)
	resp, err := l.m.cli.Get(ctx, l.m.ks.Own(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		if l.sess.Context().Err() == nil {
			l.m.log.Warn("reading own/ failed; retrying", "err", err)
		}
		l.relist = time.Now().Add(l.retry())
		return false
	}
	l.relist = time.Time{}
	l.m.mu.Lock()
	l.reset(resp.Kvs, resp.Header.Revision, initial)
	l.m.v = l.v
	l.m.mu.Unlock()
	l.m.feed.publish(nil)
	if l.wch == nil {
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(l.sess.Context()))
		l.wcancel = wcancel
		l.wch = l.m.cli.Watch(wctx, l.m.ks.Own(), clientv3.WithPrefix(), clientv3.WithRev(l.v.rev+1))
	}
	return true
}

// watched applies one watch response. A closed or failed watch (no
// leader, compaction, a broken stream) is re-listed, then re-watched.
func (l *loop) watched(resp clientv3.WatchResponse, ok bool) {
	if !ok || resp.Canceled || resp.Err() != nil {
		if l.sess.Context().Err() == nil {
			l.m.log.Warn("watch on own/ ended; re-listing", "err", resp.Err(), "compact_revision", resp.CompactRevision)
		}
		l.wcancel()
		l.wch, l.wcancel = nil, nil
		l.relist = time.Now()
		return
	}
	changes := l.classify(resp.Events)
	l.m.mu.Lock()
	for _, ev := range resp.Events {
		l.event(ev.Type, ev.Kv)
	}
	l.m.mu.Unlock()
	l.m.feed.publish(changes)
}

// checkAlarm reads etcd's alarms: a NOSPACE alarm makes the node unready
// even while keepalives still succeed.
func (l *loop) checkAlarm() {
	ctx, cancel := context.WithTimeout(l.sess.Context(), l.sess.TTL()/3)
	defer cancel()
	resp, err := l.m.cli.AlarmList(ctx)
	if err != nil {
		return
	}
	alarm := false
	for _, a := range resp.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			alarm = true
		}
	}
	l.m.mu.Lock()
	if alarm != l.m.alarm {
		if alarm {
			l.m.log.Error("etcd raised its NOSPACE alarm: writes are refused; compact and defragment etcd, or raise its quota")
		} else {
			l.m.log.Info("etcd NOSPACE alarm cleared")
		}
	}
	l.m.alarm = alarm
	l.m.mu.Unlock()
}

func (l *loop) retry() time.Duration {
	return max(l.sess.TTL()/10, 100*time.Millisecond)
}

var (
	errUngranted   = errors.New("shard: checkpoint unreadable")
	errUnconfirmed = errors.New("shard: acquisition not confirmed")
)
