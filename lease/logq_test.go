package lease

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
)

// blockedLog is a log sink that takes no record until released: a full
// pipe nobody reads.
type blockedLog struct {
	release chan struct{}
	entered chan struct{} // if not nil, told of each Handle call (buffered)
	mu      sync.Mutex
	msgs    []string
}

func (b *blockedLog) Enabled(context.Context, slog.Level) bool { return true }
func (b *blockedLog) WithAttrs([]slog.Attr) slog.Handler       { return b }
func (b *blockedLog) WithGroup(string) slog.Handler            { return b }
func (b *blockedLog) Handle(_ context.Context, r slog.Record) error {
	if b.entered != nil {
		select {
		case b.entered <- struct{}{}:
		default:
		}
	}
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "log_dropped" {
			msg += fmt.Sprintf(" (dropped %d)", a.Value.Int64())
		}
		return true
	})
	b.msgs = append(b.msgs, msg)
	return nil
}

// A renewal that fails while the log sink is blocked: the failure's log
// line waits in the session's queue, and the renew loop goes on renewing on
// its cadence instead of waiting inside the logger until its deadline.
func TestRenewalNeverWaitsForTheLogger(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	proxy := etcdtest.NewProxy(t, srv.Endpoint())
	cli := etcdtest.NewClient(t, proxy.Endpoint())
	cfg, h := testCfg(3 * time.Second)
	sink := &blockedLog{release: make(chan struct{})}
	cfg.Logger = slog.New(sink)
	// No short-TTL warning: NewSession writes it before the session (and
	// its queue) exists, on the caller's goroutine, which holds no lease.
	cfg.ElectionTimeout = 100 * time.Millisecond
	var r renewals
	r.hook(h)
	var failed atomic.Int64
	h.onAfter = func(err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	s := newSession(t, cli, cfg)
	t.Cleanup(func() { close(sink.release) }) // before the session's Close: cleanups run last first
	eventually(t, 2*slack, "a renewal", func() bool { return r.count.Load() >= 1 })

	proxy.Blackhole()
	eventually(t, s.TTL(), "a renewal failing", func() bool { return failed.Load() >= 1 })
	proxy.Restore()
	after := r.count.Load()
	// Three more renewals (one per TTL/3) with the sink still blocked: the
	// loop did not stop at the failure's log line. Without the queue, it
	// would wait there until its deadline passed.
	eventually(t, 2*s.TTL()+slack, "three renewals after the failure", func() bool { return r.count.Load() >= after+3 })
	if !s.Valid() {
		t.Fatalf("session lost while its logger was blocked: %v", s.Err())
	}
	sink.mu.Lock()
	written := len(sink.msgs)
	sink.mu.Unlock()
	if written != 0 {
		t.Fatalf("%d records written through a blocked sink", written)
	}
}

// The queue keeps records in order, drops past its bound and says how many
// it dropped, and its goroutine ends when the queue is empty.
func TestLogQueueBoundedAndOrdered(t *testing.T) {
	sink := &blockedLog{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	log, q := newQueueLogger(slog.New(sink))
	log.Info("first")
	<-sink.entered // the drain goroutine holds "first" in the blocked sink
	for i := range logqMax + 10 {
		log.Info(fmt.Sprint(i))
	}
	close(sink.release)
	q.wait()
	log.Info("after")
	q.wait()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	want := []string{"first", "0 (dropped 10)"}
	for i := 1; i < logqMax; i++ {
		want = append(want, fmt.Sprint(i))
	}
	want = append(want, "after")
	if strings.Join(sink.msgs, ",") != strings.Join(want, ",") {
		t.Fatalf("written %q\nwant    %q", sink.msgs, want)
	}
}
