package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoreEtcdCluster()...) }

var ks = keyspace.New("test")

// testCfg is a short-TTL config with hooks the test can fill in.
func testCfg(ttl time.Duration) (Config, *hooks) {
	h := &hooks{}
	cfg := DefaultConfig()
	cfg.TTL = ttl
	cfg.hooks = h
	return cfg, h
}

func newSession(t testing.TB, cli *clientv3.Client, cfg Config) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := NewSession(ctx, cli, ks, cfg)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// renewals records the send time of every successful renewal.
type renewals struct {
	mu    sync.Mutex
	sent  []time.Duration
	count atomic.Int64
}

func (r *renewals) hook(h *hooks) {
	h.onRenewed = func(sent time.Duration, _ int64) {
		r.mu.Lock()
		r.sent = append(r.sent, sent)
		r.mu.Unlock()
		r.count.Add(1)
	}
}

func (r *renewals) times() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.sent...)
}

// heldRenewal holds the next successful renewal once armed: etcd has
// answered it, and it is not applied until release.
type heldRenewal struct {
	armed  atomic.Bool
	landed chan struct{} // closed once the held renewal's answer is in
	gate   chan struct{}
}

func holdRenewal(h *hooks) *heldRenewal {
	hr := &heldRenewal{landed: make(chan struct{}), gate: make(chan struct{})}
	h.onAfter = func(err error) {
		if err == nil && hr.armed.CompareAndSwap(true, false) {
			close(hr.landed)
			<-hr.gate
		}
	}
	return hr
}

// arm holds the next successful renewal and returns once etcd answered
// it, failing t if none did within d.
func (hr *heldRenewal) arm(t testing.TB, d time.Duration) {
	t.Helper()
	hr.armed.Store(true)
	select {
	case <-hr.landed:
	case <-time.After(d):
		t.Fatal("no renewal landed")
	}
}

func (hr *heldRenewal) release() { close(hr.gate) }

// renewedSession starts a 3 s session whose next successful renewal can be
// held (held.arm), and returns once it renewed once.
func renewedSession(t testing.TB, cli *clientv3.Client) (*Session, *heldRenewal, *renewals) {
	cfg, h := testCfg(3 * time.Second)
	held := holdRenewal(h)
	r := &renewals{}
	r.hook(h)
	s := newSession(t, cli, cfg)
	poll.Must(t, 2*slack, "a renewal", poll.True(func() bool { return r.count.Load() >= 1 }))
	return s, held, r
}

// waitDone waits for the session to end and returns when it did.
func waitDone(t testing.TB, s *Session, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-s.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("session still valid %v later (remaining %v)", d, s.Remaining())
		return time.Time{}
	}
}

// expiryWatch watches a key attached to the session's lease and reports
// the moment etcd deletes it: the lease's actual expiry (or revocation).
func expiryWatch(t testing.TB, s *Session, cli *clientv3.Client, key string) <-chan time.Time {
	t.Helper()
	ctx := tctx(t)
	rev, err := s.Create(ctx, key, "alive")
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wch := cli.Watch(wctx, key, clientv3.WithRev(rev+1))
	out := make(chan time.Time, 1)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for wr := range wch {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					out <- time.Now()
					return
				}
			}
		}
	}()
	return out
}

func leaseTTL(t testing.TB, cli *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.TimeToLive(ctx, id)
	if err != nil {
		t.Fatalf("TimeToLive: %v", err)
	}
	return resp.TTL
}
