package main

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/shardcron/shardcron/internal/ledger"
	"github.com/shardcron/shardcron/receiver"
)

// sink is a fencing-aware HTTP receiver: what `dev` points its example jobs
// at, and the ledger of the fault suite. It is also the reference for users
// writing receivers: receiver.Middleware rejects a fencing token lower than
// the highest seen for the shard and drops a repeat of a key (job, item,
// tick); package ledger keeps the books, repeats and stale tokens included.
type sink struct {
	log *slog.Logger
	led *ledger.Ledger
	h   http.Handler
}

// fire is one request the sink received.
type fire = ledger.Fire

func newSink(log *slog.Logger) *sink {
	s := &sink{log: log, led: ledger.New()}
	s.h = receiver.Middleware(s.led.Store(), http.HandlerFunc(s.apply), receiver.WithObserver(s.observe))
	return s
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

// apply is the effect of an accepted run: none beyond the books.
func (s *sink) apply(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	w.WriteHeader(http.StatusNoContent)
}

// observe enters every judged run in the books and logs it.
func (s *sink) observe(r *http.Request, t receiver.Ticket) {
	s.led.Observe(r, t)
	d := t.Delivery
	if t.Verdict == receiver.Stale {
		s.log.Warn("sink rejected a stale fencing token", "job", d.Job, "item", d.Item, "tick", d.Tick, "shard", d.Shard, "token", d.Token, "highest", t.Highest, "node", d.Node)
		return
	}
	s.log.Info("sink received", "job", d.Job, "item", d.Item, "tick", d.Tick.Format(time.RFC3339), "shard", d.Shard, "token", d.Token, "node", d.Node, "path", r.URL.Path, "duplicate", t.Verdict != receiver.Accept)
}

// Fires returns a copy of every request received so far.
func (s *sink) Fires() []fire { return s.led.Fires() }
