package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// TestLeaderStopNeverValidPastExpiry stops the etcd leader under a live
// session with a 3 s TTL. One election (timeout 1 s) plus retries may or may
// not fit in the session's slack; either outcome is fine, as long as the
// session never believes it is valid once etcd has expired the lease, and
// its Remaining never exceeds what etcd reports left.
func TestLeaderStopNeverValidPastExpiry(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 3)
	cli := c.Client(t)
	cfg, h := testCfg(3 * time.Second)
	var r renewals
	r.hook(h)
	s := newSession(t, cli, cfg)
	poll.Must(t, 2*slack, "a renewal", poll.True(func() bool { return r.count.Load() >= 1 }))

	leader := c.WaitLeader(t, 10*time.Second)
	stoppedAt := time.Now()
	c.StopMember(leader)

	samples, checked := 0, 0
	for time.Since(stoppedAt) < 3*s.TTL() {
		before := r.count.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		resp, err := cli.TimeToLive(ctx, s.LeaseID())
		cancel()
		// Read after the answer: etcd evaluated the lease before this point.
		valid, rem := s.Valid(), s.Remaining()
		// A renewal applied meanwhile may have landed after etcd's answer:
		// then the two views are of different renewals.
		renewedMeanwhile := r.count.Load() != before
		samples++
		if err != nil {
			continue // no leader yet
		}
		checked++
		if resp.TTL <= 0 && valid {
			t.Fatalf("%v after the leader stopped: etcd reports the lease gone (TTL %d), the session is still valid (remaining %v)",
				time.Since(stoppedAt), resp.TTL, rem)
		}
		// etcd truncates the remaining TTL to whole seconds.
		if limit := time.Duration(resp.TTL)*time.Second + time.Second - cfg.Margin + 50*time.Millisecond; valid && !renewedMeanwhile && rem > limit {
			sent := r.times()
			t.Fatalf("%v after the leader stopped: session remaining %v exceeds etcd's view %ds (limit %v); granted %d; last renewal sent %v ago; leader now %d; renewals %d",
				time.Since(stoppedAt), rem, resp.TTL, limit, resp.GrantedTTL, boottime()-sent[len(sent)-1], c.Leader(), len(sent))
		}
	}
	if checked == 0 {
		t.Fatal("no TimeToLive answer in three TTLs after the leader stopped")
	}
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), ErrLost) {
			t.Fatalf("ended with %v, want ErrLost", s.Err())
		}
		t.Logf("leader %d stopped: session declared lost cleanly (%d samples, %d answered)", leader, samples, checked)
	default:
		if !s.Valid() {
			t.Fatal("session invalid but Done open")
		}
		t.Logf("leader %d stopped: session survived, %d renewals (%d samples, %d answered)", leader, r.count.Load(), samples, checked)
	}
	c.RestartMember(leader)
}
