package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/shardcron/shardcron/internal/ledger"
)

// sink is a fencing-aware HTTP receiver: what `dev` points its example jobs
// at, and the ledger of the fault suite. It is also the reference for users
// writing receivers: dedupe on (job, tick), and reject a fencing token lower
// than the highest seen for the shard (package ledger keeps the books).
type sink struct {
	log *slog.Logger
	led *ledger.Ledger
}

// fire is one request the sink received.
type fire = ledger.Fire

func newSink(log *slog.Logger) *sink {
	return &sink{log: log, led: ledger.New()}
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	f, err := ledger.Parse(r.Header, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if f = s.led.Record(f); !f.Accepted {
		s.log.Warn("sink rejected a stale fencing token", "job", f.Job, "tick", f.Tick, "shard", f.Shard, "token", f.Token, "node", f.Node)
		http.Error(w, fmt.Sprintf("stale fencing token %d for shard %d", f.Token, f.Shard), http.StatusConflict)
		return
	}
	s.log.Info("sink received", "job", f.Job, "tick", f.Tick.Format(time.RFC3339), "shard", f.Shard, "token", f.Token, "node", f.Node, "path", r.URL.Path, "duplicate", f.Dup)
	w.WriteHeader(http.StatusNoContent)
}

// Fires returns a copy of every request received so far.
func (s *sink) Fires() []fire { return s.led.Fires() }
