package lease

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// TestEtcdStallLongerThanTheTTL pauses a real etcd process (SIGSTOP) for
// longer than the TTL. The session stops at its own deadline, while etcd
// answers nothing; when etcd resumes, the lease has expired by etcd's clock,
// the old token's guard fails, and a new session gets a larger generation.
func TestEtcdStallLongerThanTheTTL(t *testing.T) {
	t.Parallel()
	p := etcdtest.StartProcess(t)
	cli := etcdtest.NewClient(t, p.Endpoint())
	cfg, _ := testCfg(3 * time.Second)
	s := newSession(t, cli, cfg)
	ctx := tctx(t)
	tok, _, err := s.Acquire(ctx, 0, "stalled")
	if err != nil {
		t.Fatal(err)
	}
	p.Pause()
	pausedAt := time.Now()
	doneAt := waitDone(t, s, s.TTL()+slack)
	t.Logf("etcd paused: session ended %v later (TTL %v, margin %v)", doneAt.Sub(pausedAt), s.TTL(), cfg.Margin)
	if !errors.Is(s.Err(), ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", s.Err())
	}
	// The fault itself: keep etcd stopped until well past the lease's expiry.
	time.Sleep(time.Until(pausedAt.Add(s.TTL() + time.Second)))
	p.Resume()

	var resp *clientv3.TxnResponse
	poll.Must(t, s.TTL()+slack, "the old token's guard failing", poll.True(func() bool {
		resp, err = cli.Txn(ctx).If(Guard(ks, tok)).Then(clientv3.OpPut(ks.Tick(0, "j"), "late")).Commit()
		return err == nil && !resp.Succeeded
	}))
	next := newSession(t, cli, cfg)
	tok2, _, err := next.Acquire(ctx, 0, "next")
	if err != nil || tok2.Generation <= tok.Generation {
		t.Fatalf("successor: %v %v (old generation %d)", tok2, err, tok.Generation)
	}
	if s.Valid() {
		t.Fatal("the stalled session revived")
	}
}
