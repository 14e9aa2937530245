package lease

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// Slack for timing bounds: the machine is shared and tests run under -race.
const slack = 2 * time.Second

func TestRenewalCadence(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	cfg, h := testCfg(3 * time.Second)
	var r renewals
	r.hook(h)
	s := newSession(t, cli, cfg)
	start := time.Now()
	poll.Must(t, 4*time.Second+3*slack, "five renewals", poll.True(func() bool { return r.count.Load() >= 5 }))
	elapsed := time.Since(start)
	if !s.Valid() {
		t.Fatal("session lost while renewals land")
	}
	sent := r.times()
	every := s.TTL() / 3
	var gaps []time.Duration
	for i := 1; i < len(sent); i++ {
		d := sent[i] - sent[i-1]
		gaps = append(gaps, d)
		t.Logf("renewal %d sent %v after the previous (TTL/3 = %v)", i, d, every)
		if d < every-20*time.Millisecond {
			t.Errorf("renewal sent early: %v after the previous, want %v", d, every)
		}
	}
	// The typical gap is TTL/3; one renewal delayed by a loaded machine
	// (a retry after TTL/6 + TTL/10) does not move the median.
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med > every+300*time.Millisecond {
		t.Errorf("median renewal interval %v, want about %v", med, every)
	}
	t.Logf("%d renewals in %v (TTL %v)", len(sent), elapsed, s.TTL())
	// etcd agrees that the lease is fresh: renewed within the last TTL/3.
	if ttl := leaseTTL(t, cli, s.LeaseID()); ttl < int64((s.TTL()-every-slack/2)/time.Second) {
		t.Errorf("etcd reports TTL %ds left on a lease renewed every %v", ttl, every)
	}
}

// deadlineBeforeExpiry stops renewals with stop, then checks that Done
// closes before etcd expires the lease, and returns the measured margin.
func TestDeadlinePassesBeforeExpiryBlackholed(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	direct := srv.Client(t)
	proxy := etcdtest.NewProxy(t, srv.Endpoint())
	cli := etcdtest.NewClient(t, proxy.Endpoint())
	cfg, h := testCfg(3 * time.Second)
	var r renewals
	r.hook(h)
	s := newSession(t, cli, cfg)
	ctx := tctx(t)
	tok, _, err := s.Acquire(ctx, 7, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	expired := expiryWatch(t, s, direct, ks.Member("node-a"))
	poll.Must(t, 2*slack, "a renewal through the proxy", poll.True(func() bool { return r.count.Load() >= 1 }))

	proxy.Blackhole()
	doneAt := waitDone(t, s, s.TTL()+slack)
	if s.Valid() || s.Remaining() > 0 || !errors.Is(s.Err(), ErrLost) || !errors.Is(context.Cause(s.Context()), ErrLost) {
		t.Fatalf("after Done: Valid %v, Remaining %v, Err %v", s.Valid(), s.Remaining(), s.Err())
	}
	var expiredAt time.Time
	select {
	case expiredAt = <-expired:
	case <-time.After(s.TTL() + 2*slack):
		t.Fatal("etcd never expired the lease")
	}
	margin := expiredAt.Sub(doneAt)
	t.Logf("blackholed: Done %v before etcd expired the lease (configured margin %v)", margin, cfg.Margin)
	if margin <= 0 {
		t.Fatalf("the session's deadline passed %v AFTER etcd expired the lease", -margin)
	}

	// The old owner's fenced write is rejected once the lease has gone.
	resp, err := direct.Txn(ctx).If(Guard(ks, tok)).Then(clientv3.OpPut(ks.Tick(7, "job"), "late")).Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("write guarded by the expired token: succeeded=%v err=%v", resp != nil && resp.Succeeded, err)
	}
	// The partition heals: the session stays lost, and refuses to act.
	proxy.Restore()
	if _, _, err := s.Acquire(ctx, 8, "node-a"); !errors.Is(err, ErrLost) {
		t.Fatalf("Acquire on a lost session: %v, want ErrLost", err)
	}
	if s.Valid() {
		t.Fatal("a lost session became valid again")
	}
}

func TestDeadlinePassesBeforeExpiryPausedLoop(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	cfg, h := testCfg(3 * time.Second)
	// The loop stalls (as in a long GC pause of its goroutine) until the
	// test lets it go, after etcd has expired the lease: so the loss cannot
	// trigger a revoke, and the measured margin is against the real expiry.
	var paused atomic.Bool
	resume := make(chan struct{})
	h.onBefore = func(ctx context.Context) {
		if paused.Load() {
			<-resume
		}
	}
	var r renewals
	r.hook(h)
	s := newSession(t, cli, cfg)
	var resumeOnce sync.Once
	unpause := func() { resumeOnce.Do(func() { close(resume) }) }
	t.Cleanup(unpause) // before s.Close, which joins the loop
	expired := expiryWatch(t, s, cli, ks.Member("node-b"))
	poll.Must(t, 2*slack, "a renewal", poll.True(func() bool { return r.count.Load() >= 1 }))
	paused.Store(true)
	doneAt := waitDone(t, s, s.TTL()+slack)
	renewedBefore := r.count.Load() // no renewal applies after Done
	var expiredAt time.Time
	select {
	case expiredAt = <-expired:
	case <-time.After(s.TTL() + 2*slack):
		t.Fatal("the lease was neither revoked nor expired")
	}
	margin := expiredAt.Sub(doneAt)
	t.Logf("paused renew loop: Done %v before etcd expired the lease (configured margin %v)", margin, cfg.Margin)
	if margin <= 0 {
		t.Fatalf("the deadline passed %v after the lease expired", -margin)
	}
	unpause()
	// The loop wakes on a lost session: it neither renews nor revives it.
	poll.Must(t, slack, "the loop finishing", poll.True(func() bool {
		select {
		case <-s.loopDone:
			return true
		default:
			return false
		}
	}))
	if s.Valid() || r.count.Load() != renewedBefore {
		t.Fatalf("after the pause: Valid %v, renewals %d (were %d)", s.Valid(), r.count.Load(), renewedBefore)
	}
}

func TestLateRenewalDoesNotRevive(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	s, held, _ := renewedSession(t, cli)
	held.arm(t, s.TTL()+slack) // held until after the deadline
	waitDone(t, s, s.TTL()+slack)
	// etcd renewed the lease, yet the session is lost.
	if ttl := leaseTTL(t, cli, s.LeaseID()); ttl <= 0 {
		t.Fatalf("etcd should still hold the renewed lease, TTL %d", ttl)
	}
	held.release()
	// The late success is ignored, and the lease is revoked.
	poll.Must(t, s.TTL()+slack, "revocation of the lost lease", poll.True(func() bool { return leaseTTL(t, cli, s.LeaseID()) <= 0 }))
	if s.Valid() || !errors.Is(s.Err(), ErrLost) {
		t.Fatalf("a late renewal revived the session: Valid %v Err %v", s.Valid(), s.Err())
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done reopened")
	}
}

// TestRenewedIsWhenTheAnswerWasAsked: a replica's view is "as of" the
// send of the last request etcd answered, not of when the answer was
// processed. An answer etcd sent just before it stopped (SIGSTOP) may be
// read a while later; its view must still date from before the stop.
func TestRenewedIsWhenTheAnswerWasAsked(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	s, held, r := renewedSession(t, cli)
	before := r.count.Load()
	held.arm(t, s.TTL()+slack)
	answered := time.Now() // etcd answered before this
	held.release()
	poll.Must(t, slack, "the held renewal applied", poll.True(func() bool { return r.count.Load() > before }))
	if got := s.Renewed(); !got.Before(answered) {
		t.Fatalf("Renewed = %v, after the answer was in (%v): a view would claim to be newer than etcd's last word",
			got.Format("15:04:05.000000"), answered.Format("15:04:05.000000"))
	}
}

func TestLeaseGoneIsLost(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	cfg, _ := testCfg(3 * time.Second)
	s := newSession(t, cli, cfg)
	if _, err := cli.Revoke(tctx(t), s.LeaseID()); err != nil {
		t.Fatal(err)
	}
	// The next renewal (TTL/3) learns that the lease is gone.
	waitDone(t, s, s.TTL()/3+slack)
	if !errors.Is(s.Err(), ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", s.Err())
	}
}

func TestValidReadsTheClockNotTheTimer(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	cfg, h := testCfg(3 * time.Second)
	var skew atomic.Int64
	h.clock = func() time.Duration { return boottime() + time.Duration(skew.Load()) }
	s := newSession(t, cli, cfg)
	if !s.Valid() {
		t.Fatal("fresh session invalid")
	}
	// A suspend: CLOCK_BOOTTIME jumps, Go's timers do not know yet.
	skew.Store(int64(s.TTL()))
	if s.Valid() {
		t.Fatal("Valid after the clock passed the deadline")
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Valid noticed the deadline but Done is open")
	}
	if s.Remaining() > 0 {
		t.Fatal("Remaining > 0 after the deadline")
	}
}

func TestCloseRevokesAndIsIdempotent(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	cfg, _ := testCfg(2 * time.Second)
	s := newSession(t, cli, cfg)
	ctx := tctx(t)
	if _, _, err := s.Acquire(ctx, 1, "n"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
	if s.Valid() || !errors.Is(s.Err(), ErrClosed) || !errors.Is(context.Cause(s.Context()), ErrClosed) {
		t.Fatalf("closed session: Valid %v Err %v", s.Valid(), s.Err())
	}
	if ttl := leaseTTL(t, cli, s.LeaseID()); ttl != -1 {
		t.Fatalf("lease not revoked by Close: TTL %d", ttl)
	}
	if resp, err := cli.Get(ctx, ks.Shard(1)); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("shard key survived revocation: %v %v", resp, err)
	}
	if _, _, err := s.Acquire(ctx, 2, "n"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
}

// A grant that takes longer than TTL − Margin leaves a session whose
// deadline has passed before it starts: NewSession must refuse it with
// ErrLost, not hang (it read the clock, which ends the session, while
// holding the lock that ending takes).
func TestSlowGrantIsRefused(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	cfg, h := testCfg(3 * time.Second)
	var reads atomic.Int64
	h.clock = func() time.Duration {
		if reads.Add(1) == 1 {
			return boottime() // sent_at, read before the Grant
		}
		return boottime() + 10*time.Second // the Grant answered late
	}
	type result struct {
		s   *Session
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := NewSession(tctx(t), cli, ks, cfg)
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		if r.s != nil {
			r.s.Close()
		}
		if !errors.Is(r.err, ErrLost) {
			t.Fatalf("NewSession after a slow grant: %v, want ErrLost", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("NewSession hangs when the grant took longer than TTL − Margin")
	}
}
