package lease

import (
	"context"
	"log/slog"
	"sync"
)

// A session never waits for its logger. A log sink that blocks — a full
// pipe to a slow collector, a terminal scrolled back, a disk that stalls —
// would otherwise hold the renew loop inside a Warn after a failed renewal
// (or end inside the "session lost" line, under the session's mutex) and
// cost the node its lease for want of a log line. So the session's logger
// hands each record to a queue drained by a goroutine of its own, started
// when there is something to write and ended when the queue is empty.
// Records keep their order and their time. Past logqMax waiting records the
// new ones are dropped, and the next record written carries how many were
// (log_dropped). Session.Close waits for the queue to drain.
const logqMax = 64

// logq is the queue one session's log records wait in.
type logq struct {
	mu      sync.Mutex
	queue   []queued
	busy    bool // a drain goroutine is running
	dropped int
	wg      sync.WaitGroup // the drain goroutine; joined by Session.Close
}

type queued struct {
	h slog.Handler
	r slog.Record
}

// queueHandler is a slog.Handler that queues records for h.
type queueHandler struct {
	h slog.Handler
	q *logq
}

func newQueueLogger(l *slog.Logger) (*slog.Logger, *logq) {
	q := &logq{}
	return slog.New(queueHandler{h: l.Handler(), q: q}), q
}

func (h queueHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h queueHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return queueHandler{h: h.h.WithAttrs(as), q: h.q}
}

func (h queueHandler) WithGroup(name string) slog.Handler {
	return queueHandler{h: h.h.WithGroup(name), q: h.q}
}

// Handle queues r and returns at once.
func (h queueHandler) Handle(_ context.Context, r slog.Record) error {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) >= logqMax {
		q.dropped++
		return nil
	}
	q.queue = append(q.queue, queued{h: h.h, r: r.Clone()})
	if !q.busy {
		q.busy = true
		q.wg.Add(1)
		go q.drain()
	}
	return nil
}

// drain writes the queued records in order until the queue is empty.
func (q *logq) drain() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		next := q.queue[0]
		q.queue[0] = queued{}
		q.queue = q.queue[1:]
		if q.dropped > 0 {
			next.r.AddAttrs(slog.Int("log_dropped", q.dropped))
			q.dropped = 0
		}
		q.mu.Unlock()
		_ = next.h.Handle(context.Background(), next.r)
	}
}

// wait blocks until every queued record has been written.
func (q *logq) wait() { q.wg.Wait() }
