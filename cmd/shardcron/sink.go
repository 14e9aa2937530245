package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// sink is a fencing-aware HTTP receiver: what `dev` points its example jobs
// at, and the ledger of the fault suite. It is also the reference for users
// writing receivers: dedupe on (job, tick), and reject a fencing token lower
// than the highest seen for the shard.
type sink struct {
	log *slog.Logger

	mu      sync.Mutex
	highest map[int]int64 // shard -> highest token accepted
	seen    map[fireKey]int
	fires   []fire
}

type fireKey struct {
	Job  string
	Tick time.Time
}

// fire is one request the sink received.
type fire struct {
	Job      string
	Tick     time.Time
	Shard    int
	Token    int64
	Node     string
	Rerun    bool
	At       time.Time
	Accepted bool // false: a stale token, rejected
	Dup      bool // an accepted repeat of a (job, tick) already accepted
}

func newSink(log *slog.Logger) *sink {
	return &sink{log: log, highest: map[int]int64{}, seen: map[fireKey]int{}}
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	h := r.Header
	tick, err1 := time.Parse(time.RFC3339, h.Get("Shardcron-Tick"))
	shard, err2 := strconv.Atoi(h.Get("Shardcron-Shard"))
	token, err3 := strconv.ParseInt(h.Get("Shardcron-Fencing-Token"), 10, 64)
	if h.Get("Shardcron-Job") == "" || err1 != nil || err2 != nil || err3 != nil {
		http.Error(w, "missing or malformed Shardcron-* identity headers", http.StatusBadRequest)
		return
	}
	f := fire{
		Job: h.Get("Shardcron-Job"), Tick: tick, Shard: shard, Token: token,
		Node: h.Get("Shardcron-Node"), Rerun: h.Get("Shardcron-Rerun") == "true", At: time.Now(),
	}
	s.mu.Lock()
	f.Accepted = token >= s.highest[shard]
	if f.Accepted {
		s.highest[shard] = token
		k := fireKey{f.Job, f.Tick}
		f.Dup = s.seen[k] > 0
		s.seen[k]++
	}
	s.fires = append(s.fires, f)
	s.mu.Unlock()

	if !f.Accepted {
		s.log.Warn("sink rejected a stale fencing token", "job", f.Job, "tick", f.Tick, "shard", f.Shard, "token", f.Token, "node", f.Node)
		http.Error(w, fmt.Sprintf("stale fencing token %d for shard %d", token, shard), http.StatusConflict)
		return
	}
	s.log.Info("sink received", "job", f.Job, "tick", f.Tick.Format(time.RFC3339), "shard", f.Shard, "token", f.Token, "node", f.Node, "path", r.URL.Path, "duplicate", f.Dup)
	w.WriteHeader(http.StatusNoContent)
}

// Fires returns a copy of every request received so far.
func (s *sink) Fires() []fire {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fire(nil), s.fires...)
}
