package lease

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// Deadline is the safe deadline as an instant on the session's clock
// (CLOCK_BOOTTIME outside tests): exactly sent_at(last successful renewal)
// + granted TTL − Margin. It reads no clock, so a stall between reading it
// and using it cannot stretch it; the session is valid exactly while the
// clock reads less than it, and it is zero once the session ended.
func TestDeadlineIsTheSafeDeadlineInstant(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	cfg, h := testCfg(3 * time.Second)
	var skew atomic.Int64
	h.clock = func() time.Duration { return boottime() + time.Duration(skew.Load()) }
	var last atomic.Int64 // the instant the last successful renewal allows
	h.onRenewed = func(sent time.Duration, ttl int64) {
		last.Store(int64(sent + time.Duration(ttl)*time.Second - cfg.Margin))
	}
	s := newSession(t, cli, cfg)
	if d, now := s.Deadline(), h.clock(); d <= now || d > now+s.TTL()-cfg.Margin {
		t.Fatalf("fresh session: Deadline %v, clock %v (TTL %v, margin %v)", d, now, s.TTL(), cfg.Margin)
	}
	// Between renewals, the instant is the last renewal's, to the nanosecond.
	poll.Must(t, 2*s.TTL()+slack, "Deadline equal to the last renewal's sent_at + TTL − margin", poll.True(func() bool {
		l := last.Load()
		return l != 0 && int64(s.Deadline()) == l
	}))
	// A stall (the clock jumps, timers have not fired): the instant does
	// not move with it, and Remaining agrees with it.
	before := s.Deadline()
	skew.Store(int64(s.TTL() / 4))
	if rem, d, now := s.Remaining(), s.Deadline(), h.clock(); d != before && int64(d) != last.Load() {
		t.Fatalf("Deadline moved with the clock: %v, then %v", before, d)
	} else if rem > d-now+time.Millisecond || rem < d-now-slack {
		t.Fatalf("Remaining %v, Deadline − clock %v", rem, d-now)
	}
	// The clock passes the instant (and any a renewal in flight could
	// set): the session ends, and has no instant.
	skew.Store(int64(s.Deadline() - boottime() + s.TTL()))
	if s.Valid() {
		t.Fatal("Valid with the clock at Deadline")
	}
	if d := s.Deadline(); d != 0 {
		t.Fatalf("Deadline %v after the session ended, want 0", d)
	}
}
